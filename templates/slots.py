"""Slot templates: render a version that only substitutes values by joining strings.

Most campaign templates are static text with `{{ name }}` holes. For such a version the full
path (sandboxed Jinja, CSS inlining with css-inline, text derivation with inscriptis) gives the
same output for every recipient apart from the holes, yet costs ~100-300 us a message. Here the
version is compiled once into static parts and per-recipient slots:

- Qualifying (decided from the Jinja AST, conservatively): every part (subject, HTML, text) is
  only template data and plain variable names, `{{ name }}` (no filters, attributes, calls,
  tags, loops, conditions). Anything else keeps the full renderer.
- HTML: the version is rendered once with a probe value per slot and CSS-inlined; where each
  probe lands in the inlined output tells the slot's kind: a text node or a quoted attribute
  value. css-inline re-serialises the parsed document (html5ever), so a value ends up as
  html5ever writes that text back, not as Jinja's `escape` wrote it: text `& < > U+00A0`
  become `&amp; &lt; &gt; &nbsp;` and quotes stay raw; attribute values escape `& " U+00A0`.
  A slot anywhere else (comment, `<script>`, `<style>`, a `style` attribute, a tag name, an
  unquoted attribute, after an unfinished `&entity`), or any attribute slot in a version with a
  style sheet (selectors can match attribute values), disqualifies the version. The model is
  then checked against the full inliner on two more value sets (empty, and every special).
- Text: from `text_body` as raw slots (the text environment does not escape), or derived once
  with inscriptis from the probe-inlined HTML, where text-node slots show up as their value;
  checked the same way with values of other lengths (inscriptis pads table cells).

Per message, `render_slots` returns None (the caller renders in full) when a value could make
the parser or inscriptis behave differently from the probes: a missing variable (the full path
raises the proper error), a non-scalar value, control characters, whitespace-only values, and,
for derived text, leading/trailing/double or non-space whitespace (inscriptis collapses it), an
`&` that could start a character reference (inscriptis runs html.unescape over collected text:
`&amp;amp;` in the HTML comes out as `&`) or an empty value; and when a conservative bound of
the render budget is exceeded. Values are joined, never re-scanned, so a value that looks like a
marker stays literal.
tests/templates/test_slots.py checks byte equality with the full renderer on tricky values.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import jinja2
from jinja2 import nodes
from markupsafe import escape

# The text part derived from HTML is inscriptis' output; rendering.py owns both functions.
TEXT, ATTR, RAW = "text", "attr", "raw"
_SCALARS = (str, int, float, bool, type(None))
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_OPEN_ENTITY = re.compile(r"&[A-Za-z0-9#]*\Z")
# inscriptis runs html.unescape over the text it collected: an `&` that could start a reference
# (anything but a space, `<` or `&` after it, or the value's end) could change a derived text.
_ENTITY_START = re.compile(r"&(?![ <&])")
_STYLE_ATTR_OPEN = re.compile(r"""\sstyle\s*=\s*["'][^"']*\Z""", re.IGNORECASE)
_STYLESHEET = re.compile(r"<style|<link", re.IGNORECASE)
_PROBE_CORE = "a&b<c>d\"e'f\xa0g h"
_TEXT_PROBE_CORE = "a&b<c>d\"e'f g"
_CHECK_VALUES = ("", "Zz &amp; <i>\"q\"</i> 'x' \xa0y", "1")
_TEXT_CHECK_VALUES = ("Q", "Quite a long value & <more> \"quoted\" text")
# Each slot occurrence may count its value twice against the render budget (the output
# finalizer and the stream counter) and escaping grows it at most 5x (`&` -> `&amp;`).
_BUDGET_FACTOR = 6
_BUDGET_SLACK = 32


def html_text_value(value: str) -> str:
    """How html5ever writes back a text node that held `escape(value)`."""
    return value.replace("&", "&amp;").replace("\xa0", "&nbsp;").replace("<", "&lt;").replace(">", "&gt;")


def html_attr_value(value: str) -> str:
    """How html5ever writes back a double-quoted attribute value that held `escape(value)`."""
    return value.replace("&", "&amp;").replace("\xa0", "&nbsp;").replace('"', "&quot;")


_TRANSFORMS = {TEXT: html_text_value, ATTR: html_attr_value, RAW: str}


@dataclass(frozen=True)
class SlotPart:
    """Static strings around slots: statics[0] + value(names[0]) + statics[1] + ..."""

    statics: tuple[str, ...]
    names: tuple[str, ...]
    kinds: tuple[str, ...]

    def fill(self, strings: dict[str, str]) -> tuple[str, ...]:
        """The per-slot values for one recipient, escaped for where each slot lands."""
        pairs = zip(self.names, self.kinds, strict=True)
        return tuple(_TRANSFORMS[kind](strings[name]) for name, kind in pairs)

    def join(self, values: tuple[str, ...]) -> str:
        statics = self.statics
        out = [statics[0]]
        for value, static in zip(values, statics[1:], strict=True):
            out.append(value)
            out.append(static)
        return "".join(out)


@dataclass(frozen=True, eq=False)
class SlotTemplate:
    """A version compiled into slots; compared by identity (one object per compiled version)."""

    subject: SlotPart
    html: SlotPart
    text: SlotPart
    derived_text: bool
    names: tuple[str, ...]
    html_names: frozenset[str]
    static_bytes: int
    # A random token absent from every static part: batch APIs build their tags from it.
    nonce: str


@dataclass(frozen=True)
class SlotFill:
    """One recipient's values for a SlotTemplate's HTML and text slots, escaped for their place."""

    template: SlotTemplate
    html: tuple[str, ...]
    text: tuple[str, ...]


def _plain_part(
    env: jinja2.Environment, source: str, globals_: frozenset[str]
) -> tuple[list[str], list[str]] | None:
    """(template data strings, names) of a part made only of data and `{{ name }}`; else None."""
    body = env.parse(source).body
    statics, names, current = [], [], []
    for node in body:
        if not isinstance(node, nodes.Output):
            return None
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                current.append(child.data)
            elif isinstance(child, nodes.Name) and child.ctx == "load" and child.name not in globals_:
                statics.append("".join(current))
                names.append(child.name)
                current = []
            else:
                return None
    statics.append("".join(current))
    return statics, names


def compile_slots(
    *, subject: str, html_body: str, text_body: str, text_env: jinja2.Environment,
    html_env: jinja2.Environment, inline, derive_text,
) -> SlotTemplate | None:
    """The slot form of a version, or None when it must keep the full renderer.

    `inline(html) -> html` and `derive_text(inlined html) -> text` are rendering.py's own
    finishing steps, so the model is checked against exactly what the full path does."""
    globals_ = frozenset(html_env.globals)
    try:
        parts = [_plain_part(text_env, subject, globals_), _plain_part(html_env, html_body, globals_)]
        parts.append(_plain_part(text_env, text_body, globals_) if text_body else ([], []))
    except jinja2.TemplateError:
        return None
    if any(part is None for part in parts):
        return None
    (subject_statics, subject_names), (html_statics, html_names), (text_statics, text_names) = parts
    nonce = _nonce(subject, html_body, text_body)
    html = _html_part(html_statics, html_names, inline, nonce)
    if html is None:
        return None
    if text_body:
        text = SlotPart(tuple(text_statics), tuple(text_names), (RAW,) * len(text_names))
    else:
        text = _derived_text_part(html_statics, html_names, html, inline, derive_text, nonce)
        if text is None:
            return None
    subject_part = SlotPart(tuple(subject_statics), tuple(subject_names), (RAW,) * len(subject_names))
    if any(nonce in static for part in (subject_part, html, text) for static in part.statics):
        return None
    names = tuple(dict.fromkeys([*subject_names, *html_names, *text.names]))
    static_bytes = sum(map(len, subject_statics + html_statics + text_statics))
    return SlotTemplate(subject_part, html, text, not text_body, names, frozenset(html_names),
                        static_bytes, nonce)


def _nonce(*sources: str) -> str:
    while True:
        nonce = "n" + secrets.token_hex(4)
        if not any(nonce in source for source in sources):
            return nonce


def _markers(count: int, nonce: str) -> list[str]:
    return [f"zq{nonce}m{i}x" for i in range(count)]


def _jinja_html(statics: list[str], values: list[str]) -> str:
    """What the autoescaping Jinja render outputs for these values (data is written as is)."""
    out = [statics[0]]
    for value, static in zip(values, statics[1:], strict=True):
        out.append(str(escape(value)))
        out.append(static)
    return "".join(out)


def _split_on_markers(output: str, markers: list[str]) -> tuple[list[str], list[str]] | None:
    """(static pieces, what stood between each pair of markers), markers in order, each twice."""
    pieces, inners, position = [], [], 0
    for marker in markers:
        start = output.find(marker, position)
        end = output.find(marker, start + len(marker)) if start >= 0 else -1
        if start < 0 or end < 0 or output.count(marker) != 2:
            return None
        pieces.append(output[position:start])
        inners.append(output[start + len(marker):end])
        position = end + len(marker)
    pieces.append(output[position:])
    return pieces, inners


def _html_part(statics: list[str], names: list[str], inline, nonce: str) -> SlotPart | None:
    if any(_OPEN_ENTITY.search(static) for static in statics[:-1]):
        return None
    markers = _markers(len(names), nonce)
    probed = inline(_jinja_html(statics, [m + _PROBE_CORE + m for m in markers]))
    split = _split_on_markers(probed, markers)
    if split is None:
        return None
    pieces, inners = split
    kinds = []
    has_stylesheet = bool(_STYLESHEET.search("".join(statics)))
    for i, inner in enumerate(inners):
        kind = next((k for k in (TEXT, ATTR) if inner == _TRANSFORMS[k](_PROBE_CORE)), None)
        before = "".join(pieces[: i + 1])
        if kind is None or (kind == ATTR and (has_stylesheet or _STYLE_ATTR_OPEN.search(before))):
            return None
        kinds.append(kind)
    part = SlotPart(tuple(pieces), tuple(names), tuple(kinds))
    for value in _CHECK_VALUES:
        strings = dict.fromkeys(names, value)
        if part.join(part.fill(strings)) != inline(_jinja_html(statics, [value] * len(names))):
            return None
    return part


def _derived_text_part(statics: list[str], names: list[str], html: SlotPart, inline, derive_text,
                       nonce: str) -> SlotPart | None:
    """Text-node slots carry their value into inscriptis' text; attribute slots vanish."""
    markers = _markers(len(names), nonce)
    probe = [m + _TEXT_PROBE_CORE + m for m in markers]
    text = derive_text(inline(_jinja_html(statics, probe)))
    shown = [(m, name) for m, name, kind in zip(markers, names, html.kinds, strict=True) if kind == TEXT]
    if any(m in text for m, kind in zip(markers, html.kinds, strict=True) if kind != TEXT):
        return None
    split = _split_on_markers(text, [m for m, _ in shown])
    if split is None or any(inner != _TEXT_PROBE_CORE for inner in split[1]):
        return None
    pieces, _ = split
    if any("&" in piece[-34:] for piece in pieces[:-1]):
        return None  # a value could complete a reference the static text starts
    shown_names = tuple(name for _, name in shown)
    part = SlotPart(tuple(pieces), shown_names, (RAW,) * len(shown_names))
    for value in _TEXT_CHECK_VALUES:
        expected = derive_text(inline(_jinja_html(statics, [value] * len(names))))
        if part.join(part.fill(dict.fromkeys(shown_names, value))) != expected:
            return None
    return part


def slot_strings(template: SlotTemplate, context: dict, max_bytes: int) -> dict[str, str] | None:
    """The string value of every slot name, or None when this context needs the full renderer."""
    strings: dict[str, str] = {}
    total = template.static_bytes
    for name in template.names:
        try:
            value = context[name]
        except (KeyError, TypeError):
            return None
        if type(value) not in _SCALARS:
            return None
        string = value if type(value) is str else str(value)
        total += _BUDGET_FACTOR * len(string) + _BUDGET_SLACK
        if name in template.html_names and (_UNSAFE.search(string) or (string and not string.strip(" "))):
            return None
        strings[name] = string
    if total > max_bytes:
        return None
    if template.derived_text:
        for name in template.text.names:
            string = strings[name]
            if not string or _ENTITY_START.search(string) or string != " ".join(string.split()):
                return None
    return strings
