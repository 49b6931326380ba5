from django.apps import AppConfig


class FeedbackConfig(AppConfig):
    name = "feedback"
    verbose_name = "Feedback (ESP events)"

    def ready(self) -> None:
        """A client the reputation guard holds may not start new sends (clients/send_guards.py)."""
        from django.db.models.signals import post_delete, post_save

        from clients.send_guards import register_send_guard
        from delivery.extensions import register_evidence_reader, register_sandbox_event_sink
        from feedback import partitioning  # noqa: F401  (registers the day-partitioned tables)
        from feedback.models import ReputationHold
        from feedback.permissions import forget_client_verdict, reputation_hold_refusal
        from feedback.selectors import stored_events_about
        from feedback.services.sandbox import sandbox_events_schedule

        register_send_guard(reputation_hold_refusal)
        # An event stored while its message was still SENDING is the evidence an AMBIGUOUS row
        # waits for (delivery/services/ambiguity.py): it must not be re-sent.
        register_evidence_reader(stored_events_about)
        # A test key's message settled by the sandbox gets the events an ESP would send.
        register_sandbox_event_sink(sandbox_events_schedule)
        # A hold placed or released here is seen by this process's next request at once (others:
        # within NOTIFIER_SEND_GUARD_CACHE_SECONDS, decision 53).
        post_save.connect(forget_client_verdict, sender=ReputationHold)
        post_delete.connect(forget_client_verdict, sender=ReputationHold)

        # Personal-data retention (decision 120): a message batch strips its ESP events in
        # its own transaction; the walks after it strip the events and the webhook bodies no
        # message batch reached.
        from clients.personal_data import register_personal_data_step
        from delivery.extensions import register_personal_data_remover
        from feedback.services.personal_data import (
            esp_events_step,
            events_of_messages_strip,
            webhook_bodies_step,
        )

        register_personal_data_remover(events_of_messages_strip)
        register_personal_data_step("esp_events", esp_events_step, order=30)
        register_personal_data_step("webhook_bodies", webhook_bodies_step, order=40)
