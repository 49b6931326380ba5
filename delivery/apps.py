from django.apps import AppConfig


class DeliveryConfig(AppConfig):
    name = "delivery"

    def ready(self) -> None:
        from clients.personal_data import register_personal_data_step
        from clients.retention import register_pending_horizon
        from delivery import partitioning  # noqa: F401  (registers the day-partitioned tables)
        from delivery.selectors import scheduled_messages_pending_until
        from delivery.services.personal_data import messages_personal_data_step

        # Personal-data retention (decision 120): the messages are stripped first (order 10),
        # and a service's scheduled one-off messages bound how short it may set it.
        register_personal_data_step("messages", messages_personal_data_step, order=10)
        register_pending_horizon(scheduled_messages_pending_until)
