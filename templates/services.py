"""Writes and reads on templates. Versions are immutable: an edit adds version N+1."""

from __future__ import annotations

from django.db import transaction
from rest_framework import serializers

from clients.models import ApiClient
from templates.models import Template, TemplateVersion
from templates.rendering import TemplateError, required_variables

Variants = dict[str, dict[str, str]]


def _variables_of(locale: str, content: dict[str, str]) -> list[str]:
    try:
        return required_variables(subject=content["subject"], html_body=content["html_body"],
                                  text_body=content.get("text_body", ""))
    except TemplateError as exc:
        raise TemplateError(f"{locale}: {exc}" if locale else str(exc)) from exc


def _add_version(*, template: Template, number: int, subject: str, html_body: str,
                 text_body: str, variants: Variants | None) -> TemplateVersion:
    default_vars = _variables_of("", {"subject": subject, "html_body": html_body, "text_body": text_body})
    rows = []
    for locale, content in sorted((variants or {}).items()):
        variables = _variables_of(locale, content)
        extra = sorted(set(variables) - set(default_vars))
        if extra:
            # The API checks a send's context against the default's variables only.
            raise TemplateError(f"{locale}: uses variables the default does not: {', '.join(extra)}")
        rows.append(TemplateVersion(template=template, version=number, locale=locale,
                                    subject=content["subject"], html_body=content["html_body"],
                                    text_body=content.get("text_body", ""), required_variables=variables))
    default = TemplateVersion.objects.create(
        template=template, version=number, subject=subject, html_body=html_body,
        text_body=text_body, required_variables=default_vars,
    )
    TemplateVersion.objects.bulk_create(rows)
    return default


@transaction.atomic
def template_create(*, client: ApiClient, name: str, subject: str, html_body: str, text_body: str = "",
                    variants: Variants | None = None) -> TemplateVersion:
    """Create the client's template with its first version (raises TemplateError on bad syntax)."""
    template = Template.objects.create(client=client, name=name)
    return _add_version(template=template, number=1, subject=subject, html_body=html_body,
                        text_body=text_body, variants=variants)


@transaction.atomic
def template_update(*, template: Template, subject: str, html_body: str, text_body: str = "",
                    variants: Variants | None = None) -> TemplateVersion:
    """Add the next version; the row lock serialises concurrent edits of one template."""
    locked = Template.objects.select_for_update().get(pk=template.pk)
    current = locked.current_version
    return _add_version(template=locked, number=(current.version if current else 0) + 1,
                        subject=subject, html_body=html_body, text_body=text_body, variants=variants)


def template_deactivate(*, template: Template) -> None:
    """Soft delete: messages and campaigns keep the versions they pinned."""
    Template.objects.filter(pk=template.pk).update(is_active=False)


def template_version_get_current(*, client_id: str | None, reference: str | int) -> TemplateVersion | None:
    """The newest default-locale version of the client's active template named by id or by name.

    Only the client's own templates, whatever its scopes: what a send renders belongs to the
    sender (decision 50). Another client's template is None, like a missing one.
    """
    templates = Template.objects.filter(is_active=True, client_id=client_id)
    text = str(reference)
    if text.isascii() and text.isdigit():
        if len(text) > 18:  # beyond bigint: no such id (and no DataError 500)
            return None
        templates = templates.filter(pk=int(text))
    else:
        templates = templates.filter(name=reference)
    return (
        TemplateVersion.objects.filter(template__in=templates, locale="")
        .select_related("template")
        .order_by("-version")
        .first()
    )


def template_version_for_send(*, client_id: str | None, reference: str | int) -> TemplateVersion:
    """The version a send request names (`template` / `template_id`), or the 400 that names it."""
    version = template_version_get_current(client_id=client_id, reference=reference)
    if version is None:
        raise serializers.ValidationError(f"No active template {reference!r}.")
    return version
