"""A Jinja2 sandbox with budgets, so a hostile template is stopped instead of hurting a worker.

On top of Jinja2's SandboxedEnvironment (no `__class__`/`__subclasses__` escapes; we use the
Immutable variant so lists and dicts cannot be grown in place) every render gets a `Budget`:

- time: a deadline, checked every 16 loop iterations or calls;
- loops: every `{% for %}` iterates through a guard (the parsed tree is rewritten), at most
  `max_iterations` in total, nested loops included; `range()` is capped at `max_range`;
- calls: at most `max_calls` (macros, methods, globals), so macro recursion fan-out stops;
- bytes: every string-building op (`*`, `%`, `~`, filters, the output stream) counts the bytes it
  makes before making them, against `max_bytes` per render, so `"x" * 10**9`, doubling chains and
  `|center(10**9)` fail fast instead of allocating gigabytes;
- numbers: `**` with a large exponent is refused (10**10**10 would never finish).

A blown budget raises RenderLimitExceeded (a TemplateError), which the API reports as a 400 and
the sender records as a failed render. Cost on the happy path: see docs/benchmarks.md.
"""

from __future__ import annotations

import contextvars
import operator
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes, pass_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import _PassArg

LOOP_GUARD = "_notifier_loop_guard"
MAX_EXPONENT = 64
_GROWING_FILTERS = {"center", "indent", "wordwrap", "format", "truncate", "join", "replace",
                    "batch", "slice", "list", "string", "tojson", "pprint", "urlize", "filesizeformat",
                    "xmlattr", "map", "select", "reject", "selectattr", "rejectattr", "sum"}
_FORMAT_FILTER = jinja2.filters.do_format
_PAD_METHODS = {"center", "ljust", "rjust", "zfill", "expandtabs", "format", "format_map"}


class RenderLimitExceeded(jinja2.TemplateError):
    """The render went over a budget (time, loops, calls or size)."""


@dataclass
class Limits:
    seconds: float = 0.25
    max_iterations: int = 20_000
    max_calls: int = 20_000
    max_bytes: int = 2 * 1024 * 1024
    max_range: int = 10_000


@dataclass
class Budget:
    limits: Limits
    deadline: float = 0.0
    iterations: int = 0
    calls: int = 0
    bytes: int = 0
    _ticks: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.limits.seconds

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks & 15 == 0 and time.monotonic() > self.deadline:
            raise RenderLimitExceeded(f"render took longer than {self.limits.seconds:.2f} s")

    def spend_bytes(self, count: int) -> None:
        # No clock read here (this runs per output value): loops and calls check the deadline.
        self.bytes += count
        if self.bytes > self.limits.max_bytes:
            raise RenderLimitExceeded(f"render output over {self.limits.max_bytes} bytes")


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("render_budget", default=None)


def current_budget() -> Budget | None:
    return _BUDGET.get()


class budget_scope:  # noqa: N801 - used as a context manager
    def __init__(self, limits: Limits) -> None:
        self.budget = Budget(limits)

    def __enter__(self) -> Budget:
        self._token = _BUDGET.set(self.budget)
        return self.budget

    def __exit__(self, *exc: object) -> None:
        _BUDGET.reset(self._token)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple | bytes) else 0


def _count_output(value: Any) -> Any:
    budget = _BUDGET.get()
    if budget is not None:
        budget.bytes += len(value) if type(value) is str else 32
        if budget.bytes > budget.limits.max_bytes:
            raise RenderLimitExceeded(f"render output over {budget.limits.max_bytes} bytes")
    return value


def _loop_guard(iterable: Iterable[Any]) -> Iterator[Any]:
    budget = current_budget()
    for item in iterable:
        if budget is not None:
            budget.iterations += 1
            if budget.iterations > budget.limits.max_iterations:
                raise RenderLimitExceeded(f"more than {budget.limits.max_iterations} loop iterations")
            budget.tick()
        yield item


def _bounded_range(*args: int) -> range:
    budget = current_budget()
    cap = budget.limits.max_range if budget else Limits.max_range
    rng = range(*args)
    if len(rng) > cap:
        raise RenderLimitExceeded(f"range() longer than {cap}")
    return rng


class _GuardedCodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:  # noqa: N802 - Jinja hook
        # `a ~ b ~ c`: the parts are counted before they are joined.
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"environment.checked_concat({func_name}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    code_generator_class = _GuardedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **options: Any) -> None:
        # Every {{ expression }} is counted as it is output (inside macros too, where the
        # buffer would otherwise collect escaped copies before any join).
        options.setdefault("finalize", _count_output)
        super().__init__(**options)
        self.globals[LOOP_GUARD] = _loop_guard
        self.globals["range"] = _bounded_range
        self.globals.pop("namespace", None)  # mutable across loop iterations: no accumulation
        # Filters that can make big output from small input are wrapped (counted, and never
        # folded at compile time: the optimizer would run `'x'|center(10**9)` outside any
        # budget). Size-preserving ones (upper, e, title...) stay direct: they are hot.
        self.filters = {name: _counted_filter(func) if name in _GROWING_FILTERS else func
                        for name, func in self.filters.items()}

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Call(nodes.Name(LOOP_GUARD, "load"), [loop.iter], [], None, None,
                                   lineno=loop.lineno)
        return tree

    def checked_concat(self, join: Any, parts: tuple) -> Any:
        budget = current_budget()
        if budget is not None:
            budget.spend_bytes(sum(len(part) if isinstance(part, str) else 16 for part in parts))
        return join(parts)

    def concat(self, parts: Iterable[str]) -> str:  # type: ignore[override]
        """Joins macro, block and call buffers (compiled code calls environment.concat)."""
        budget = current_budget()
        if budget is None:
            return "".join(parts)
        parts = list(parts)
        budget.spend_bytes(sum(map(len, parts)))
        return "".join(parts)

    def call_binop(self, context: jinja2.runtime.Context, op: str, left: Any, right: Any) -> Any:
        budget = current_budget()
        if op == "**" and isinstance(right, int) and abs(right) > MAX_EXPONENT:
            raise RenderLimitExceeded(f"exponent larger than {MAX_EXPONENT}")
        if budget is not None:
            if op == "*" and isinstance(left, int) and _size(right):
                left, right = right, left
            if op == "*" and _size(left) and isinstance(right, int):
                budget.spend_bytes(len(left) * max(right, 0))
            elif op == "+":
                budget.spend_bytes(_size(left) + _size(right))
            elif op == "%" and isinstance(left, str):
                _check_format_widths(left)
        result = {"*": operator.mul, "**": operator.pow, "%": operator.mod, "+": operator.add}[op](
            left, right)
        if budget is not None and op == "%":
            budget.spend_bytes(_size(result))
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = current_budget()
        if budget is not None:
            budget.calls += 1
            if budget.calls > budget.limits.max_calls:
                raise RenderLimitExceeded(f"more than {budget.limits.max_calls} calls")
            budget.tick()
            if getattr(__obj, "__name__", "") in _PAD_METHODS:
                _check_pad_args(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if budget is not None and isinstance(result, str):
            budget.spend_bytes(len(result))
        return result

    def wrap_str_format(self, value: Any) -> Any:
        """Jinja hands every attribute through here and wraps `str.format` (the wrapper hides
        the string): check the widths of the format string first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format_widths(value.__self__)
        return wrapped


# "%99999d", "%.99999f", "{:>99999}": widths/precisions that would allocate before we could count.
_WIDE_FORMAT = re.compile(r"%[-+ #0]*(\d{5,}|\d*\.\d{5,})|\{[^{}]*:[^{}]*\d{5,}[^{}]*\}")


@lru_cache(maxsize=1024)
def _check_format_widths(fmt: str) -> None:
    if _WIDE_FORMAT.search(fmt):
        raise RenderLimitExceeded("format width too large")


def _check_pad_args(obj: Any, args: tuple, kwargs: dict) -> None:
    budget = current_budget()
    cap = budget.limits.max_bytes if budget else Limits.max_bytes
    self_value = getattr(obj, "__self__", None)
    if isinstance(self_value, str) and obj.__name__ in ("format", "format_map"):
        _check_format_widths(self_value)
    for value in [*args, *kwargs.values()]:
        if isinstance(value, int) and value > cap:
            raise RenderLimitExceeded("padding width too large")


def _counted_filter(func: Any) -> Any:
    """Filters are called directly by compiled code (not via env.call): size-check them here.

    The wrapper takes the context, which also stops Jinja from evaluating a filter on constant
    arguments at compile time (outside any budget); it hands the original what it asked for.
    """
    pass_arg = _PassArg.from_obj(func)

    @pass_context
    def wrapper(context: Any, *args: Any, **kwargs: Any) -> Any:
        if pass_arg is _PassArg.context:
            args = (context, *args)
        elif pass_arg is _PassArg.eval_context:
            args = (context.eval_ctx, *args)
        elif pass_arg is _PassArg.environment:
            args = (context.environment, *args)
        offset = 0 if pass_arg is None else 1
        checked(func, args[offset:], kwargs)
        result = func(*args, **kwargs)
        budget = current_budget()
        if budget is not None:
            budget.spend_bytes(_size(result))
        return result

    wrapper.__name__ = getattr(func, "__name__", "filter")
    return wrapper


def checked(func: Any, args: tuple, kwargs: dict) -> None:
    """Refuse size arguments that would allocate past the budget before we could count."""
    budget = _BUDGET.get()
    cap = budget.limits.max_bytes if budget is not None else Limits.max_bytes
    for values in (args[1:], kwargs.values()):
        for value in values:
            if type(value) is int and value > cap:
                raise RenderLimitExceeded("filter argument too large")
    if args and type(args[0]) is str and func is _FORMAT_FILTER:
        _check_format_widths(args[0])
