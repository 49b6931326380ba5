from django.apps import AppConfig


class CallbacksConfig(AppConfig):
    name = "callbacks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The scheduler's lock holder publishes the deliveries due (scheduling/extensions.py)."""
        from callbacks.services.dispatch import callbacks_dispatch_sweep
        from scheduling import extensions as scheduling

        scheduling.register_sweep(callbacks_dispatch_sweep)
