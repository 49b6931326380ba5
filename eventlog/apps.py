from django.apps import AppConfig


class EventlogConfig(AppConfig):
    name = "eventlog"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from clients.personal_data import register_personal_data_step
        from eventlog.personal_data import events_personal_data_step

        # After the messages (decision 120): the events' copies of their addresses.
        register_personal_data_step("events", events_personal_data_step, order=20)
