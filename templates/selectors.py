"""Reads on templates."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework.exceptions import NotFound

from templates.models import Template, TemplateVersion


def template_list_active() -> QuerySet[Template]:
    return Template.objects.filter(is_active=True)


def template_get_active(*, template_id: int) -> Template:
    template = Template.objects.filter(pk=template_id, is_active=True).first()
    if template is None:
        raise NotFound("No such template.")
    return template


def template_version_get(*, template: Template, number: int | None = None) -> TemplateVersion:
    """The default-locale row of version `number` (the newest when None)."""
    versions = TemplateVersion.objects.filter(template=template, locale="").select_related("template")
    version = versions.filter(version=number).first() if number else versions.order_by("-version").first()
    if version is None:
        raise NotFound(f"Template {template.pk} has no version {number}.")
    return version
