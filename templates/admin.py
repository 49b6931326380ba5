from django.contrib import admin

from templates.models import Template, TemplateVersion


class TemplateVersionInline(admin.StackedInline):
    model = TemplateVersion
    extra = 0
    readonly_fields = ["version", "required_variables", "created_at"]


@admin.register(Template)
class TemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "is_active", "created_at"]
    search_fields = ["name"]
    inlines = [TemplateVersionInline]
