"""What the render budgets cost: one email (subject, HTML with a loop, text derived) rendered
with notifier's budgeted sandbox vs Jinja2's plain SandboxedEnvironment, same template.

    DJANGO_SETTINGS_MODULE=notifier.settings python bench/template_sandbox.py [N]

Prints renders/s and microseconds per render for both, and for the alternative of rendering in a
persistent worker subprocess (one round trip per render) (Jinja only: CSS inlining and text
derivation are the same in both and excluded), and the overhead.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

harness.django_setup()

import jinja2  # noqa: E402
from jinja2.sandbox import SandboxedEnvironment  # noqa: E402

from templates.rendering import render_limits  # noqa: E402
from templates.sandbox import BoundedSandbox, budget_scope  # noqa: E402

HTML = """<html><body><h1>Hello {{ name|title }}</h1>
<p>Your order {{ order.id }} of {{ order.date }} is on its way.</p>
<table>{% for item in order.lines %}<tr><td>{{ loop.index }}</td><td>{{ item.name }}</td>
<td>{{ '%.2f'|format(item.price) }}</td></tr>{% endfor %}</table>
{% if vip %}<p>Thanks for being a VIP.</p>{% endif %}<p>{{ footer }}</p></body></html>"""
CONTEXT = {"name": "ada lovelace", "vip": True, "footer": "notifier <3",
           "order": {"id": 4242, "date": "2026-11-29",
                     "lines": [{"name": f"item {n}", "price": n * 1.5} for n in range(10)]}}


def bench(env: jinja2.Environment, n: int, budget: bool) -> float:
    template = env.from_string(HTML)
    limits = render_limits()
    # CPU time of this process: the machine is shared, wall time swings with its load.
    started = time.process_time()
    for _ in range(n):
        if budget:
            with budget_scope(limits):
                "".join(template.generate(CONTEXT))
        else:
            "".join(template.generate(CONTEXT))
    return time.process_time() - started


def _render_plain(_: int) -> int:
    """In a worker process: what a subprocess-isolated render would do per message."""
    return len("".join(_WORKER_ENV.generate(CONTEXT)))


_WORKER_ENV = None


def _init_worker() -> None:
    global _WORKER_ENV
    _WORKER_ENV = SandboxedEnvironment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(HTML)


def bench_subprocess(n: int) -> float:
    """The alternative we did not take: each render sent to a persistent worker process
    (one round trip per render, as a timeout-per-render design needs)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, initializer=_init_worker) as pool:
        pool.submit(_render_plain, 0).result()
        started = time.perf_counter()
        for i in range(n):
            pool.submit(_render_plain, i).result()
        return time.perf_counter() - started


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    plain = SandboxedEnvironment(autoescape=True, undefined=jinja2.StrictUndefined)
    bounded = BoundedSandbox(autoescape=True, undefined=jinja2.StrictUndefined)
    bench(plain, 500, False), bench(bounded, 500, True)  # warm up
    runs = [(bench(plain, n, False), bench(bounded, n, True)) for _ in range(5)]  # interleaved
    base, ours = min(r[0] for r in runs), min(r[1] for r in runs)
    print(f"renders: {n} (best of 5, CPU time)")
    print(f"plain SandboxedEnvironment: {n / base:,.0f} renders/s, {base / n * 1e6:.1f} us/render")
    print(f"budgeted BoundedSandbox:    {n / ours:,.0f} renders/s, {ours / n * 1e6:.1f} us/render")
    print(f"overhead: {(ours / base - 1) * 100:.0f}% ({(ours - base) / n * 1e6:.1f} us/render)")
    m = max(n // 10, 100)
    sub = bench_subprocess(m)
    print(f"subprocess per render (alternative, wall): {m / sub:,.0f} renders/s, "
          f"{sub / m * 1e6:.1f} us/render")


if __name__ == "__main__":
    main()
