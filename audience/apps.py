from django.apps import AppConfig


class AudienceConfig(AppConfig):
    """Contacts, lists, segments and suppressions: who may be mailed (docs/architecture.md)."""

    name = "audience"
