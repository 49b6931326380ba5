"""Render an email's subject, text and HTML from a template version, safely.

One sandboxed Jinja2 environment per part: HTML autoescapes merge values, subject and text do
not (they are not HTML). Undefined variables raise instead of rendering blanks. CSS is inlined
(css-inline) because most mail clients drop <style>; the text part is derived from the HTML with
inscriptis when the template has none. Compiled templates are cached per version id, so a batch
compiles once and renders many times.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import css_inline
import jinja2
from inscriptis import get_text
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

_HTML_ENV = SandboxedEnvironment(autoescape=True, undefined=jinja2.StrictUndefined)
_TEXT_ENV = SandboxedEnvironment(autoescape=False, undefined=jinja2.StrictUndefined)
_INLINER = css_inline.CSSInliner(load_remote_stylesheets=False)


class TemplateError(ValueError):
    """A template that does not parse, or a render that failed (e.g. a missing variable)."""


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    text: str
    html: str


@dataclass(frozen=True)
class CompiledTemplate:
    subject: jinja2.Template
    text: jinja2.Template | None
    html: jinja2.Template


def required_variables(*, subject: str, html_body: str, text_body: str = "") -> list[str]:
    """Top-level variables the template reads; raises TemplateError on a syntax error."""
    names: set[str] = set()
    for source, env in ((subject, _TEXT_ENV), (text_body, _TEXT_ENV), (html_body, _HTML_ENV)):
        try:
            names |= meta.find_undeclared_variables(env.parse(source))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"line {exc.lineno}: {exc.message}") from exc
    return sorted(names)


@lru_cache(maxsize=512)
def compile_version(version_id: int, subject: str, html_body: str, text_body: str) -> CompiledTemplate:
    """Compile once per version (the arguments identify it; versions are immutable)."""
    return CompiledTemplate(
        subject=_TEXT_ENV.from_string(subject),
        text=_TEXT_ENV.from_string(text_body) if text_body else None,
        html=_HTML_ENV.from_string(html_body),
    )


def render(compiled: CompiledTemplate, context: dict) -> RenderedEmail:
    """Render all parts; the subject is folded onto one line so no value can inject headers."""
    try:
        subject = " ".join(compiled.subject.render(context).split())
        html = _INLINER.inline(compiled.html.render(context))
        text = compiled.text.render(context) if compiled.text else get_text(html).strip()
    except (jinja2.TemplateError, ValueError, TypeError) as exc:
        raise TemplateError(str(exc)) from exc
    return RenderedEmail(subject=subject, text=text, html=html)
