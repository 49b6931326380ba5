"""Render an email's subject, text and HTML from a template version, safely. The one render path.

The sender and the API both come here: `render_version(version, context, locale=...)` picks the
locale variant (contact locale "fr-CA" -> variant "fr-CA", else "fr", else the default), and
`render(compile_version(...), context)` renders compiled parts. Environments are sandboxed with
budgets (templates/sandbox.py): no attribute escapes, bounded loops, calls, output size and time.
HTML autoescapes merge values, subject and text do not (they are not HTML). Undefined variables
raise instead of rendering blanks. CSS is inlined (css-inline) because most mail clients drop
<style>; the text part is derived from the HTML with inscriptis when the template has none.
Compiled templates are cached per version id: a batch compiles once and renders many times.
A footer the platform adds (a `Footer`: broadcast mail's preference link) is appended to the
rendered parts, on the full path and the slot path alike (the link is one more slot).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import css_inline
import jinja2
from django.conf import settings
from inscriptis import get_text
from jinja2 import meta
from markupsafe import escape as markupsafe_escape

from templates.sandbox import BoundedSandbox, Limits, RenderLimitExceeded, budget_scope, current_budget
from templates.slots import (
    ATTR,
    RAW,
    SlotFill,
    SlotPart,
    SlotTemplate,
    compile_slots,
    html_attr_value,
    slot_strings,
)

if TYPE_CHECKING:
    from templates.models import TemplateVersion

_HTML_ENV = BoundedSandbox(autoescape=True, undefined=jinja2.StrictUndefined)
_TEXT_ENV = BoundedSandbox(autoescape=False, undefined=jinja2.StrictUndefined)
_INLINER = css_inline.CSSInliner(load_remote_stylesheets=False)
_GLOBALS = frozenset(_HTML_ENV.globals)
# What a render may raise on hostile or broken input; all become TemplateError.
_RENDER_ERRORS = (jinja2.TemplateError, ValueError, TypeError, ArithmeticError, LookupError,
                  AttributeError, RecursionError, MemoryError)


class TemplateError(ValueError):
    """A template that does not parse, or a render that failed (missing variable, over a limit)."""


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    text: str
    html: str
    # Set when the render came from slots (templates/slots.py): the shared static parts and this
    # recipient's escaped values, so a batch API can send one body plus substitutions.
    fill: SlotFill | None = None


@dataclass(frozen=True)
class Footer:
    """A block appended to an email around one per-recipient link, the context's `variable`:
    `html_head` + the link (escaped for a double-quoted attribute) + `html_tail` right before the
    HTML's `</body>`, and `text_head` + the link + `text_tail` at the end of the text part.
    Static strings, HTML already escaped: no template syntax is read in them."""

    variable: str
    html_head: str
    html_tail: str
    text_head: str
    text_tail: str


# Values the platform puts into a message's context at send (consent: `preferences_url`, the
# recipient's preference page): a template may name them though its sender never sends them, and
# previews render them with these stand-ins.
PLATFORM_VARIABLES = {"preferences_url": "https://notifier.invalid/p/preview/"}


@dataclass(frozen=True)
class CompiledTemplate:
    subject: jinja2.Template
    text: jinja2.Template | None
    html: jinja2.Template


def render_limits() -> Limits:
    return Limits(
        seconds=settings.NOTIFIER_TEMPLATE_RENDER_SECONDS,
        max_iterations=settings.NOTIFIER_TEMPLATE_MAX_LOOP_ITERATIONS,
        max_bytes=settings.NOTIFIER_TEMPLATE_MAX_OUTPUT_BYTES,
    )


def required_variables(*, subject: str, html_body: str, text_body: str = "") -> list[str]:
    """Top-level variables the template reads; raises TemplateError naming part and line."""
    names: set[str] = set()
    parts = (("subject", subject, _TEXT_ENV), ("text_body", text_body, _TEXT_ENV),
             ("html_body", html_body, _HTML_ENV))
    for part, source, env in parts:
        try:
            names |= meta.find_undeclared_variables(env.parse(source))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{part} line {exc.lineno}: {exc.message}") from exc
    return sorted(names - _GLOBALS)


@lru_cache(maxsize=512)
def compile_version(version_id: int, subject: str, html_body: str, text_body: str) -> CompiledTemplate:
    """Compile once per version (the arguments identify it; versions are immutable)."""
    return CompiledTemplate(
        subject=_TEXT_ENV.from_string(subject),
        text=_TEXT_ENV.from_string(text_body) if text_body else None,
        html=_HTML_ENV.from_string(html_body),
    )


@lru_cache(maxsize=512)
def compile_version_slots(
    version_id: int, subject: str, html_body: str, text_body: str
) -> SlotTemplate | None:
    """The slot form of a version (templates/slots.py), or None: it keeps the full renderer."""
    try:
        return compile_slots(subject=subject, html_body=html_body, text_body=text_body, text_env=_TEXT_ENV,
                             html_env=_HTML_ENV, inline=_INLINER.inline, derive_text=_derive_text)
    except Exception:  # noqa: BLE001 - a version the probe cannot handle simply renders in full
        return None


def render_slots(slots: SlotTemplate, context: dict, *, limits: Limits | None = None) -> RenderedEmail | None:
    """Join the static parts with this context's values; None when the full renderer must run
    (a missing or unusual value, or near the output budget): it then decides, and errs."""
    limits = limits or render_limits()
    strings = slot_strings(slots, context, limits.max_bytes)
    if strings is None:
        return None
    html_values, text_values = slots.html.fill(strings), slots.text.fill(strings)
    subject = " ".join(slots.subject.join(slots.subject.fill(strings)).split())
    return RenderedEmail(subject=subject, text=slots.text.join(text_values),
                         html=slots.html.join(html_values), fill=SlotFill(slots, html_values, text_values))


def render_for_send(version: TemplateVersion, context: dict, footer: Footer | None = None) -> RenderedEmail:
    """The sender's render: slots when the version and the values allow, else the full path;
    `footer` appended to both parts (its link is `context[footer.variable]`)."""
    key = (version.id, version.subject, version.html_body, version.text_body)
    slots = _slots_for(key, footer)
    rendered = render_slots(slots, context) if slots is not None else None
    if rendered is not None:
        return rendered
    rendered = render(compile_version(*key), context)
    return rendered if footer is None else _footer_append(rendered, footer, str(context[footer.variable]))


# Version id -> (its parts, its slots, its slots with each footer). Every message of a batch
# loads its own copy of the version's strings, so an lru_cache lookup would hash a whole body per
# message (~1 us a KB); comparing with the stored parts is a memcmp.
_SLOTS_BY_ID: dict[int, tuple[tuple[str, str, str], SlotTemplate | None, dict]] = {}


def _slots_for(key: tuple[int, str, str, str], footer: Footer | None = None) -> SlotTemplate | None:
    entry = _SLOTS_BY_ID.get(key[0])
    if entry is None or entry[0] != key[1:]:
        if len(_SLOTS_BY_ID) >= 512:
            _SLOTS_BY_ID.clear()
        entry = (key[1:], compile_version_slots(*key), {})
        _SLOTS_BY_ID[key[0]] = entry
    slots = entry[1]
    if footer is None or slots is None:
        return slots
    footered = entry[2].get(footer)
    if footered is None:
        footered = entry[2][footer] = _slots_with_footer(slots, footer)
    return footered


def _html_footer_at(html: str) -> int:
    """Where a footer goes in rendered HTML: before the last `</body>` (css-inline always
    writes one), else at the end."""
    at = html.rfind("</body>")
    return len(html) if at < 0 else at


def _footer_append(rendered: RenderedEmail, footer: Footer, link: str) -> RenderedEmail:
    """The full path's footer: the same strings the footered slot template joins."""
    html, at = rendered.html, _html_footer_at(rendered.html)
    block = f"{footer.html_head}{html_attr_value(str(markupsafe_escape(link)))}{footer.html_tail}"
    text = f"{rendered.text}{footer.text_head}{link}{footer.text_tail}"
    return RenderedEmail(rendered.subject, text, html[:at] + block + html[at:], rendered.fill)


def _slots_with_footer(slots: SlotTemplate, footer: Footer) -> SlotTemplate:
    """`slots` with the footer's link as one more slot (an attribute value in the HTML, raw in
    the text), its strings in the static parts around it."""
    html, text, name = slots.html, slots.text, footer.variable
    last = html.statics[-1]
    at = _html_footer_at(last)
    html = SlotPart((*html.statics[:-1], last[:at] + footer.html_head, footer.html_tail + last[at:]),
                    (*html.names, name), (*html.kinds, ATTR))
    text = SlotPart((*text.statics[:-1], text.statics[-1] + footer.text_head, footer.text_tail),
                    (*text.names, name), (*text.kinds, RAW))
    extra = len(footer.html_head + footer.html_tail + footer.text_head + footer.text_tail)
    names = tuple(dict.fromkeys([*slots.names, name]))
    return SlotTemplate(slots.subject, html, text, slots.derived_text, names, slots.html_names | {name},
                        slots.static_bytes + extra, slots.nonce)


def _derive_text(html: str) -> str:
    return get_text(html).strip()


def _bounded(chunks: Iterable[str]) -> Iterator[str]:
    """The top-level output stream, counted chunk by chunk against the render's budget."""
    budget = current_budget()
    for chunk in chunks:
        if budget is not None:
            budget.spend_bytes(len(chunk))
        yield chunk


def _render_part(template: jinja2.Template, context: dict) -> str:
    return "".join(_bounded(template.generate(context)))


def render(compiled: CompiledTemplate, context: dict, *, limits: Limits | None = None) -> RenderedEmail:
    """Render all parts within one budget; the subject is folded onto one line (no injection)."""
    limits = limits or render_limits()
    try:
        with budget_scope(limits):
            subject = " ".join(_render_part(compiled.subject, context).split())
            html = _render_part(compiled.html, context)
            text = _render_part(compiled.text, context) if compiled.text else None
        html, text = _finish_html(html, text)
    except RenderLimitExceeded as exc:
        raise TemplateError(f"template stopped: {exc}") from exc
    except _RENDER_ERRORS as exc:
        raise TemplateError(str(exc) or type(exc).__name__) from exc
    return RenderedEmail(subject=subject, text=text, html=html)


# Rendered HTML -> [CSS-inlined HTML, derived text or None]. Both are pure functions of the
# HTML, and inscriptis is ~45 us of a ~120 us render: a template whose HTML does not depend on
# the context (or a batch of identical ones) pays them once per process. Bounded in entries and
# entry size; the text is derived only for a template without a text part, as before.
_DERIVED: dict[str, list] = {}
_DERIVED_MAX_ENTRIES = 256
_DERIVED_MAX_HTML = 64 * 1024


def _finish_html(html: str, text: str | None) -> tuple[str, str]:
    """(HTML with CSS inlined, the text part: `text`, or derived from the HTML by inscriptis)."""
    entry = _DERIVED.get(html)
    if entry is None:
        entry = [_INLINER.inline(html), None]
        if len(html) <= _DERIVED_MAX_HTML:
            if len(_DERIVED) >= _DERIVED_MAX_ENTRIES:
                _DERIVED.clear()
            _DERIVED[html] = entry
    if text is None:
        if entry[1] is None:
            entry[1] = _derive_text(entry[0])
        text = entry[1]
    return entry[0], text


def _normalise(locale: str) -> str:
    return locale.strip().replace("_", "-").lower()


def choose_variant(variants: list[TemplateVersion], locale: str) -> TemplateVersion:
    """Exact locale, then its language, then the default (locale "") variant."""
    by_locale = {_normalise(v.locale): v for v in variants}
    wanted = _normalise(locale or "")
    for candidate in (wanted, wanted.split("-")[0], ""):
        if candidate in by_locale:
            return by_locale[candidate]
    return variants[0]


def variant_for_locale(version: TemplateVersion, locale: str) -> TemplateVersion:
    """The row of this version to render for a contact with `locale` ("" -> the row itself)."""
    return choose_variant(list(version.siblings()), locale) if locale else version


def render_version(version: TemplateVersion, context: dict, *, locale: str = "") -> RenderedEmail:
    """Render the variant of `version` that suits `locale` (previews call this; a platform
    variable the context lacks shows its stand-in)."""
    variant = variant_for_locale(version, locale)
    compiled = compile_version(variant.id, variant.subject, variant.html_body, variant.text_body)
    return render(compiled, {**PLATFORM_VARIABLES, **context})


def missing_variables(version: TemplateVersion, context: dict) -> list[str]:
    """What the template names that neither the context nor the platform (PLATFORM_VARIABLES) gives."""
    return sorted(set(version.required_variables) - set(context) - PLATFORM_VARIABLES.keys())
