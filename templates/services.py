"""Writes and reads on templates."""

from __future__ import annotations

from django.db import transaction

from templates.models import Template, TemplateVersion
from templates.rendering import required_variables


@transaction.atomic
def template_create(*, name: str, subject: str, html_body: str, text_body: str = "") -> TemplateVersion:
    """Create a template with its first version (raises TemplateError on bad syntax)."""
    variables = required_variables(subject=subject, html_body=html_body, text_body=text_body)
    template = Template.objects.create(name=name)
    return TemplateVersion.objects.create(
        template=template,
        version=1,
        subject=subject,
        html_body=html_body,
        text_body=text_body,
        required_variables=variables,
    )


def template_version_get_current(*, reference: str | int) -> TemplateVersion | None:
    """The newest version of an active template named by id or by name."""
    templates = Template.objects.filter(is_active=True)
    text = str(reference)
    if text.isascii() and text.isdigit():
        if len(text) > 18:  # beyond bigint: no such id (and no DataError 500)
            return None
        templates = templates.filter(pk=int(text))
    else:
        templates = templates.filter(name=reference)
    return (
        TemplateVersion.objects.filter(template__in=templates)
        .select_related("template")
        .order_by("-version")
        .first()
    )
