"""Slot templates (templates/slots.py): which versions qualify, and byte equality with the full
renderer (sandboxed Jinja + css-inline + inscriptis) on tricky values."""

from __future__ import annotations

import itertools

import pytest

from templates.rendering import (
    compile_version,
    compile_version_slots,
    render,
    render_for_send,
    render_slots,
)

_ids = itertools.count(900_000)

QUALIFYING = {
    "text node": ("Hello {{ name }}", "<h1>Hi {{ name }}</h1><p>Static paragraph.</p>", ""),
    "text and attribute": ("Digest for {{ name }}", '<p>Hello <b>{{ name }}</b>, '
                           '<a href="https://x.test/?u={{ uid }}">open</a></p>', ""),
    "single-quoted attribute": ("s", "<p title='{{ name }}'>{{ uid }}</p>", ""),
    "style sheet, text slots": ("s", "<style>p{color:red}</style><p>Hi {{ name }}</p>", ""),
    "text body": ("Hi {{ name }}", "<p>{{ name }}</p>", "Dear {{ name }}, id {{ uid }}.\n"),
    "raw block and comment": ("s", "<p>{# note #}{{ name }} {% raw %}{{ not_a_slot }}{% endraw %}</p>", ""),
    "title element": ("s", "<title>{{ name }}</title><p>x {{ name }}</p>", "Plain"),
    "no slots at all": ("Welcome", "<p>Same for everyone</p>", ""),
    "ampersand before a slot, text body": ("s", "<p>Fish &amp;{{ name }}</p>", "Fish &{{ name }}"),
    "repeated name, two kinds": ("{{ name }}", '<a title="{{ name }}">{{ name }}</a> and {{ name }}', ""),
}

FALLING_BACK = {
    "condition": ("s", "<p>{% if name %}Hi {{ name }}{% endif %}</p>", ""),
    "loop": ("s", "<ul>{% for i in items %}<li>{{ i }}</li>{% endfor %}</ul>", ""),
    "filter": ("s", "<p>{{ name|upper }}</p>", ""),
    "attribute access": ("s", "<p>{{ user.name }}</p>", ""),
    "call": ("s", "<p>{{ range(3) }}</p>", ""),
    "filter in subject": ("{{ name|title }}", "<p>{{ name }}</p>", ""),
    "logic in text body": ("s", "<p>{{ name }}</p>", "{% if name %}x{% endif %}"),
    "slot in script": ("s", '<script>var n = "{{ name }}";</script><p>x</p>', ""),
    "slot in style attribute": ("s", '<p style="color: {{ name }}">x</p>', ""),
    "attribute slot with a style sheet": ("s", '<style>.vip{color:red}</style>'
                                               '<p class="{{ name }}">x</p>', ""),
    "unquoted attribute": ("s", "<a href={{ name }}>x</a>", ""),
    "slot as tag name": ("s", "<{{ name }}>x</{{ name }}>", ""),
    "slot after an open entity": ("s", "<p>&{{ name }}</p>", ""),
    "slot in a comment": ("s", "<!-- {{ name }} --><p>x</p>", ""),
    "ampersand before a slot (derived text)": ("s", "<p>Fish &amp;{{ name }}</p>", ""),
    "table cells (inscriptis pads them)": ("s", "<table><tr><td>{{ name }}</td><td>b</td></tr>"
                                                "<tr><td>ccc</td><td>d</td></tr></table>", ""),
}

TRICKY = [
    "Ada", "Ada Lovelace", "<script>alert(1)</script>", 'Tom & "Jerry" \'s', "&amp; &lt;b&gt; &#39;",
    "a&b<c>d", "Zoë Ünïcødé 😀 中文", "", "  ", " lead", "trail ", "two  spaces", "tab\there",
    "line\nbreak", "cr\r\nlf", "nul\x00byte", "nbsp\xa0here", "\u2003em space", "%recipient.name%",
    "-notifier_html_part-", "AT&T", "x&", "&lt", "lt;", "Tom & Jerry &", "a &amp b",
    "{{ name }}", "{% if x %}", "zqn0000m0x", "x" * 5000, 0, 42, -1.5, True,
    None, ["list"], {"a": 1},
]


def _version(subject: str, html: str, text: str) -> tuple[int, str, str, str]:
    return (next(_ids), subject, html, text)


class _Version:
    def __init__(self, key: tuple[int, str, str, str]) -> None:
        self.id, self.subject, self.html_body, self.text_body = key


def _full(key: tuple[int, str, str, str], context: dict):
    return render(compile_version(*key), context)


@pytest.mark.parametrize("name", QUALIFYING)
def test_value_only_templates_compile_into_slots(name):
    assert compile_version_slots(*_version(*QUALIFYING[name])) is not None


@pytest.mark.parametrize("name", FALLING_BACK)
def test_templates_with_logic_or_risky_slots_keep_the_full_renderer(name):
    assert compile_version_slots(*_version(*FALLING_BACK[name])) is None


@pytest.mark.parametrize("name", QUALIFYING)
def test_slots_render_byte_for_byte_what_the_full_renderer_does(name):
    key = _version(*QUALIFYING[name])
    slots = compile_version_slots(*key)
    fast_count = 0
    for value, other in itertools.product(TRICKY, ["Bob", "<i>&</i>"]):
        context = {"name": value, "uid": other}
        fast = render_slots(slots, context)
        full = _full(key, context)
        if fast is not None:
            fast_count += 1
            assert (fast.subject, fast.html, fast.text) == (full.subject, full.html, full.text), value
        # Whatever path it takes, what the sender renders is the full renderer's output.
        sent = render_for_send(_Version(key), context)
        assert (sent.subject, sent.html, sent.text) == (full.subject, full.html, full.text), value
    assert fast_count >= len(TRICKY) // 2  # the join path is the common case


def test_common_values_take_the_join_path():
    key = _version(*QUALIFYING["text and attribute"])
    slots = compile_version_slots(*key)
    for value in ["Ada", "Tom & \"Jerry\"", "<b>x</b>", "Zoë 😀", 42, None, "%recipient.x%"]:
        assert render_slots(slots, {"name": value, "uid": "u1"}) is not None, value


@pytest.mark.parametrize("value", ["  ", "nul\x00byte", "cr\r\nlf", ["list"], {"a": 1}])
def test_values_the_probes_did_not_cover_fall_back(value):
    key = _version(*QUALIFYING["text node"])
    assert render_slots(compile_version_slots(*key), {"name": value}) is None


@pytest.mark.parametrize("value", ["", "two  spaces", " lead", "a &amp; b", "\u2003em"])
def test_derived_text_values_inscriptis_would_change_fall_back(value):
    key = _version(*QUALIFYING["text node"])
    assert render_slots(compile_version_slots(*key), {"name": value}) is None
    full = _full(key, {"name": value})
    assert render_for_send(_Version(key), {"name": value}).text == full.text


def test_a_missing_variable_still_fails_with_the_full_renderers_error():
    from templates.rendering import TemplateError

    key = _version(*QUALIFYING["text node"])
    assert render_slots(compile_version_slots(*key), {}) is None
    with pytest.raises(TemplateError, match="name"):
        render_for_send(_Version(key), {})


def test_a_value_holding_the_templates_own_marker_stays_literal():
    key = _version(*QUALIFYING["text and attribute"])
    slots = compile_version_slots(*key)
    marker = f"zq{slots.nonce}m1x"
    context = {"name": f"{marker} -{slots.nonce}h1- %recipient.{slots.nonce}h1%", "uid": "U"}
    fast = render_slots(slots, context)
    full = _full(key, context)
    assert fast is not None and fast.html == full.html and fast.text == full.text
    assert fast.html.count(marker) == 1


def test_near_the_output_budget_the_full_renderer_decides(settings):
    from templates.rendering import TemplateError

    settings.NOTIFIER_TEMPLATE_MAX_OUTPUT_BYTES = 10_000
    key = _version(*QUALIFYING["text node"])
    assert render_slots(compile_version_slots(*key), {"name": "x" * 3000}) is None
    with pytest.raises(TemplateError, match="bytes"):
        render_for_send(_Version(key), {"name": "x" * 20_000})


def test_the_fill_holds_each_slots_value_escaped_for_its_place():
    key = _version("s", '<p title="{{ uid }}">{{ name }}</p>', "T {{ name }} {{ uid }}")
    email = render_slots(compile_version_slots(*key), {"name": 'A<&>"\xa0', "uid": 'B<&>"\xa0'})
    assert email.fill.html == ('B<&amp;>&quot;&nbsp;', 'A&lt;&amp;&gt;"&nbsp;')
    assert email.fill.text == ('A<&>"\xa0', 'B<&>"\xa0')
