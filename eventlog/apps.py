from django.apps import AppConfig


class EventlogConfig(AppConfig):
    name = "eventlog"
    default_auto_field = "django.db.models.BigAutoField"
