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
    # Products of two bounded inputs (decision 46): refused before the allocation is made.
    "lipsum": "{{ lipsum(10**6) }}",
    "lipsum long paragraphs": "{{ lipsum(20, max=10**6) }}",
    "indent many lines": "{{ ('a\n' * 10000)|indent(20000) }}",
    "indent string width": "{{ ('a\n' * 10000)|indent('x' * 20000) }}",
    "join filter separator": "{{ range(5000)|join('y' * 50000) }}",
    "join method separator": "{{ ('y' * 50000).join(range(5000)|map('string')) }}",
    "replace filter": "{{ ('x' * 100000)|replace('', 'y' * 2000) }}",
    "replace method": "{{ ('x' * 100000).replace('x', 'y' * 2000) }}",
    "wordwrap wrapstring": "{{ ('ab ' * 100000)|wordwrap(1, true, 'y' * 2000) }}",
    "expandtabs": "{{ ('x\t' * 10000).expandtabs(20000) }}",
    "center on a huge width": "{{ 'x'|center(2000000) ~ 'x'|center(2000000) }}",
    "format many args": "{{ ('%s' * 100)|format(*(['y' * 100000] * 100)) }}",
    "repeat a joined range": "{{ (range(10000)|join(',')) * 1000 }}",
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


def test_ordinary_uses_of_the_multiplying_helpers_still_render():
    html = ("{{ lipsum(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ [1, 2]|join(', ') }}|"
            "{{ ', '.join(['x', 'y']) }}|{{ 'abc'|replace('b', 'xx') }}|{{ 'a.b'.replace('.', '--') }}|"
            "{{ 'one two three'|wordwrap(5, wrapstring='/') }}|{{ 'a\tb'.expandtabs(4) }}")
    parts = _render(html).html.split("|")
    assert parts[0].count("<p>") == 2
    assert parts[1:-1] == ["  a\n  b", "1, 2", "x, y", "axxc", "a--b", "one/two/three"]
    assert parts[-1].startswith("a   b")  # then the closing tags css-inline adds


def test_merge_values_are_escaped_and_ordinary_templates_render():
    html = ("{% for item in items %}<li>{{ item.name|title }}: {{ '%.2f' % item.price }}</li>"
            "{% endfor %}<p>{{ note }}</p>{{ 'ab' * 3 }}{{ range(3)|list|length }}")
    context = {"items": [{"name": "tea", "price": 2.5}, {"name": "cake", "price": 3}],
               "note": "<img src=x onerror=alert(1)>"}
    email = _render(html, context)
    assert "<li>Tea: 2.50</li><li>Cake: 3.00</li>" in email.html
    assert "&lt;img src=x onerror=alert(1)&gt;" in email.html and "<img" not in email.html
    assert "ababab3" in email.html
