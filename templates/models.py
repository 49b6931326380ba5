"""Email templates with immutable versions.

A `Template` is the stable identity callers name; every edit adds a `TemplateVersion`, and each
message pins the version it was rendered from, so an edit never changes mail already queued.
"""

from __future__ import annotations

from django.db import models


class Template(models.Model):
    # The service that owns the template (decisions 50, 102); names are unique per service.
    client = models.ForeignKey("clients.Service", on_delete=models.PROTECT, related_name="+")
    name = models.SlugField(max_length=100)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "name"], name="template_client_name_unique")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def current_version(self) -> TemplateVersion | None:
        return self.versions.filter(locale="").order_by("-version").first()


class TemplateVersion(models.Model):
    template = models.ForeignKey(Template, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    # "" is the default content; "fr", "pt-BR"... are variants of the same version, chosen by
    # the contact's locale with a fallback to the language, then to the default.
    locale = models.CharField(max_length=16, blank=True, default="")
    subject = models.CharField(max_length=998)
    html_body = models.TextField()
    text_body = models.TextField(blank=True, default="")
    # Variables the template reads, found by parsing it when saved: the API rejects a send
    # whose context lacks one, instead of failing later in a worker.
    required_variables = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["template", "version", "locale"],
                                    name="template_version_locale_unique")
        ]

    def __str__(self) -> str:
        suffix = f" [{self.locale}]" if self.locale else ""
        return f"{self.template.name} v{self.version}{suffix}"

    def siblings(self) -> models.QuerySet[TemplateVersion]:
        """Every locale variant of this version, the default ("") first."""
        return TemplateVersion.objects.filter(
            template_id=self.template_id, version=self.version
        ).order_by("locale")
