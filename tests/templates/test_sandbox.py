"""F20: hostile templates are refused or stopped within time and memory bounds; no escape."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from templates.rendering import TemplateError, compile_version, render
from templates.sandbox import Limits

HOSTILE = {
    "huge range": "{% for i in range(10**9) %}x{% endfor %}",
    "nested loops": "{% for a in range(5000) %}{% for b in range(5000) %}{% endfor %}{% endfor %}",
    "string repeat": "{{ 'x' * 1000000000 }}",
    "list repeat": "{{ ([1] * 1000000000)|length }}",
    "power": "{{ 7 ** 99999999 }}",
    "center filter": "{{ 'x'|center(1000000000) }}",
    "center method": "{{ 'x'.center(1000000000) }}",
    "format width": "{{ '%1000000000d' % 1 }}",
    "format method": "{{ '{:>1000000000}'.format(1) }}",
    "doubling sets": "{% set a = 'x' * 10000 %}{% set b = a ~ a ~ a ~ a ~ a ~ a ~ a ~ a %}"
                     "{% set c = b ~ b ~ b ~ b ~ b ~ b ~ b ~ b %}{% set d = c ~ c ~ c ~ c ~ c ~ c %}"
                     "{% set e = d ~ d ~ d ~ d ~ d ~ d ~ d %}{{ e ~ e ~ e }}",
    "macro fan-out": "{% macro m(n) %}{% if n %}{{ m(n-1) }}{{ m(n-1) }}{% else %}xxxxxxxx{% endif %}"
                     "{% endmacro %}{{ m(40) }}",
    "macro buffer": "{% macro m() %}{% for i in range(10000) %}{{ s }}{% endfor %}{% endmacro %}"
                    "{% set s = 'y' * 100000 %}{{ m() }}",
    "output size": "{% for i in range(10000) %}" + "z" * 1000 + "{% endfor %}",
    "recursion": "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}",
}
ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.system('id') }}",
    "{{ self._TemplateReference__context }}",
    "{{ [].append.__self__ }}{% set x = [] %}{{ x.append(1) }}",
    "{{ lipsum.__globals__['os'] }}",
    "{{ namespace(a=1) }}",
]


def _render(html: str, context: dict | None = None, limits: Limits | None = None):
    compiled = compile_version(hash(html), "subject", html, "")
    return render(compiled, context or {}, limits=limits or Limits(seconds=1.0))


@pytest.mark.parametrize("html", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_templates_are_stopped_within_time_and_memory(html):
    tracemalloc.start()
    started = time.monotonic()
    with pytest.raises(TemplateError):
        _render(html)
    elapsed = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 5, elapsed                       # 1 s budget + slack for a loaded machine
    assert peak < 64 * 1024 * 1024, peak              # never near the gigabytes asked for


@pytest.mark.parametrize("html", ESCAPES)
def test_attribute_escapes_and_mutation_are_refused(html):
    with pytest.raises(TemplateError):
        _render(html)


def test_a_slow_render_is_stopped_by_the_deadline():
    # Under every count limit, but slow: the deadline stops it.
    html = "{% for a in range(10000) %}{{ (a|string * 50)|length }}{% endfor %}"
    limits = Limits(seconds=0.01, max_iterations=10**9, max_calls=10**9, max_bytes=10**9)
    started = time.monotonic()
    with pytest.raises(TemplateError, match="longer than"):
        _render(html, limits=limits)
    assert time.monotonic() - started < 2


def test_merge_values_are_escaped_and_ordinary_templates_render():
    html = ("{% for item in items %}<li>{{ item.name|title }}: {{ '%.2f' % item.price }}</li>"
            "{% endfor %}<p>{{ note }}</p>{{ 'ab' * 3 }}{{ range(3)|list|length }}")
    context = {"items": [{"name": "tea", "price": 2.5}, {"name": "cake", "price": 3}],
               "note": "<img src=x onerror=alert(1)>"}
    email = _render(html, context)
    assert "<li>Tea: 2.50</li><li>Cake: 3.00</li>" in email.html
    assert "&lt;img src=x onerror=alert(1)&gt;" in email.html and "<img" not in email.html
    assert "ababab3" in email.html
