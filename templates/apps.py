from django.apps import AppConfig


class TemplatesConfig(AppConfig):
    name = "templates"
    label = "templates"
    verbose_name = "Email templates"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from templates.models import Template, TemplateVersion
        from templates.services import forget_changed_template

        # Any change, whoever writes it, reaches the send lookup's cache (decision 53).
        for model in (Template, TemplateVersion):
            post_save.connect(forget_changed_template, sender=model)
            post_delete.connect(forget_changed_template, sender=model)
