"""Reads on templates."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework.exceptions import NotFound

from clients.models import Service
from clients.tenancy import owned, owned_or_404
from templates.models import Template, TemplateVersion


def template_list_active(*, client: Service) -> QuerySet[Template]:
    return owned(Template.objects.filter(is_active=True), client)


def template_get_active(*, client: Service, template_id: int) -> Template:
    """The active template if the client may see it (404 otherwise, also for another client's)."""
    return owned_or_404(Template.objects.filter(is_active=True), client, message="No such template.",
                        pk=template_id)


def template_version_get(*, template: Template, number: int | None = None) -> TemplateVersion:
    """The default-locale row of version `number` (the newest when None)."""
    versions = TemplateVersion.objects.filter(template=template, locale="").select_related("template")
    version = versions.filter(version=number).first() if number else versions.order_by("-version").first()
    if version is None:
        raise NotFound(f"Template {template.pk} has no version {number}.")
    return version
