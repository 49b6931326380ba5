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
- numbers: `**` with a large exponent is refused (10**10**10 would never finish);
- multipliers: where the result is a product of two bounded inputs (`lipsum(n, max=...)`,
  `|indent` on many lines, `|join`/`.join` with a long separator, `|replace`/`.replace`,
  `|wordwrap`'s wrapstring, `.expandtabs`), its size is estimated from the inputs and refused
  before the call when it would not fit in what is left of the budget: counting afterwards
  is too late, the allocation (and its time, out of reach of the deadline) has happened.

A blown budget raises RenderLimitExceeded (a TemplateError), which the API reports as a 400 and
the sender records as a failed render. Cost on the happy path: see docs/benchmarks.md.
"""

from __future__ import annotations

import contextvars
import inspect
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
_PAD_METHODS = {"center", "ljust", "rjust", "zfill", "format", "format_map"}


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

    def reserve_bytes(self, count: int) -> None:
        """Refuse, before making it, a result of about `count` bytes that cannot fit."""
        if self.bytes + count > self.limits.max_bytes:
            raise RenderLimitExceeded(f"render output over {self.limits.max_bytes} bytes")

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
        self.globals["lipsum"] = _bounded_lipsum
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
            name = getattr(__obj, "__name__", "")
            if name in _PAD_METHODS:
                _check_pad_args(__obj, args, kwargs)
            elif name in _STR_PRODUCTS and isinstance(getattr(__obj, "__self__", None), str):
                args = _STR_PRODUCTS[name](budget, __obj.__self__, args, kwargs)
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
    estimate = _FILTER_PRODUCTS.get(func.__name__)
    signature = inspect.signature(func) if estimate is not None else None

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
        if estimate is not None and (budget := current_budget()) is not None:
            bound = signature.bind(*args, **kwargs)
            estimate(budget, bound.arguments)
            args, kwargs = bound.args, bound.kwargs
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


# Results whose size is a product of their inputs: estimated and reserved before the call.
LIPSUM_BYTES_PER_WORD = 12  # a lorem word, its space or comma, and the HTML paragraph markup


# Jinja's parameter names: templates call lipsum(n, html, min=..., max=...).
def _bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    budget = current_budget()
    if budget is not None:
        budget.reserve_bytes(_as_count(n) * _as_count(max) * LIPSUM_BYTES_PER_WORD)
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


def _as_count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _materialized(value: Any) -> Any:
    """A one-shot iterable as a list (it must be counted before it is joined)."""
    return value if isinstance(value, str | list | tuple | dict) else list(value)


def _joined_size(budget: Budget, separator: Any, items: Any) -> None:
    if isinstance(separator, str) and items:
        budget.reserve_bytes(len(separator) * (len(items) - 1))


def _replaced_size(budget: Budget, s: Any, old: Any, new: Any) -> None:
    if isinstance(s, str) and isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
        budget.reserve_bytes(len(s) + s.count(old) * (len(new) - len(old)))  # "" matches len+1 times


def _estimate_indent(budget: Budget, arguments: dict) -> None:
    s, width = arguments.get("s"), arguments.get("width", 4)
    pad = len(width) if isinstance(width, str) else _as_count(width)
    if isinstance(s, str):
        budget.reserve_bytes(len(s) + pad * (s.count("\n") + 1))


def _estimate_join(budget: Budget, arguments: dict) -> None:
    arguments["value"] = _materialized(arguments["value"])
    _joined_size(budget, arguments.get("d", ""), arguments["value"])


def _estimate_replace(budget: Budget, arguments: dict) -> None:
    _replaced_size(budget, arguments.get("s"), arguments.get("old"), arguments.get("new"))


def _estimate_wordwrap(budget: Budget, arguments: dict) -> None:
    s, wrapstring = arguments.get("s"), arguments.get("wrapstring")
    if isinstance(s, str) and isinstance(wrapstring, str):
        width = max(_as_count(arguments.get("width", 79)), 1)
        breaks = len(s) // width + s.count(" ") + s.count("\n") + 1  # at most one per word or width
        budget.reserve_bytes(len(s) + breaks * len(wrapstring))


_FILTER_PRODUCTS = {"do_indent": _estimate_indent, "do_join": _estimate_join,
                    "do_replace": _estimate_replace, "do_wordwrap": _estimate_wordwrap}


def _str_join(budget: Budget, separator: str, args: tuple, kwargs: dict) -> tuple:
    if not args:
        return args
    items = _materialized(args[0])
    _joined_size(budget, separator, items)
    return (items, *args[1:])


def _str_replace(budget: Budget, s: str, args: tuple, kwargs: dict) -> tuple:
    if len(args) >= 2:
        _replaced_size(budget, s, args[0], args[1])
    return args


def _str_expandtabs(budget: Budget, s: str, args: tuple, kwargs: dict) -> tuple:
    tabsize = _as_count(args[0] if args else kwargs.get("tabsize", 8))
    budget.reserve_bytes(len(s) + s.count("\t") * tabsize)
    return args


_STR_PRODUCTS = {"join": _str_join, "replace": _str_replace, "expandtabs": _str_expandtabs}
