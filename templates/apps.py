from django.apps import AppConfig


class TemplatesConfig(AppConfig):
    name = "templates"
    label = "templates"
    verbose_name = "Email templates"
