"""Templates in the admin: create and edit through the services (an edit adds a version), a
rendered preview of the current version, and the versions read-only (they are immutable)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from core.admin_tools import LargeTableAdmin
from templates.models import Template, TemplateVersion
from templates.rendering import TemplateError, render_version, required_variables
from templates.services import template_create, template_deactivate, template_update


class TemplateVersionInline(admin.TabularInline):
    model = TemplateVersion
    extra = 0
    can_delete = False
    fields = ["version", "locale", "subject", "required_variables", "created_at"]
    readonly_fields = fields
    ordering = ["-version", "locale"]
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TemplateForm(forms.ModelForm):
    subject = forms.CharField(max_length=998)
    html_body = forms.CharField(widget=forms.Textarea(attrs={"rows": 16, "cols": 100}))
    text_body = forms.CharField(widget=forms.Textarea(attrs={"rows": 6, "cols": 100}), required=False)

    class Meta:
        model = Template
        fields = ["client", "name", "is_active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = self.instance.current_version if self.instance.pk else None
        if current:
            for name in ("subject", "html_body", "text_body"):
                self.fields[name].initial = getattr(current, name)

    def clean(self) -> dict:
        data = super().clean()
        if "\r" in data.get("subject", "") or "\n" in data.get("subject", ""):
            self.add_error("subject", "The subject must be one line.")
        try:
            required_variables(subject=data.get("subject", ""), html_body=data.get("html_body", ""),
                               text_body=data.get("text_body", ""))
        except TemplateError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return data


def sample_context(version: TemplateVersion) -> dict[str, str]:
    """Placeholder values so the preview shows where each variable lands."""
    return {name: f"[{name}]" for name in version.required_variables}


@admin.register(Template)
class TemplateAdmin(LargeTableAdmin):
    form = TemplateForm
    list_display = ["name", "client", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    readonly_fields = ["preview"]
    raw_id_fields = ["client"]
    inlines = [TemplateVersionInline]

    @admin.display(description="Preview of the current version")
    def preview(self, template: Template) -> str:
        version = template.current_version if template.pk else None
        if version is None:
            return "-"
        try:
            rendered = render_version(version, sample_context(version))
        except TemplateError as exc:
            return format_html("<strong>Render failed:</strong> {}", exc)
        # srcdoc in a sandboxed iframe: the email's HTML cannot script the admin page.
        return format_html(
            "<p><strong>Subject:</strong> {}</p>"
            '<iframe sandbox="" srcdoc="{}" style="width:100%;height:420px;border:1px solid #ccc">'
            "</iframe><pre style='white-space:pre-wrap'>{}</pre>",
            rendered.subject, rendered.html, rendered.text,
        )

    def save_model(self, request: HttpRequest, obj: Template, form: TemplateForm, change: bool) -> None:
        content = {name: form.cleaned_data[name] for name in ("subject", "html_body", "text_body")}
        if not change:
            version = template_create(client=obj.client, name=obj.name, **content)
            obj.pk, obj.created_at = version.template_id, version.template.created_at
            if not obj.is_active:
                template_deactivate(template=obj)
            return
        obj.save()
        current = obj.current_version
        if current is None or any(getattr(current, k) != v for k, v in content.items()):
            template_update(template=obj, **content)
