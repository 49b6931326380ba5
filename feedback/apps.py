from django.apps import AppConfig


class FeedbackConfig(AppConfig):
    name = "feedback"
    verbose_name = "Feedback (ESP events)"

    def ready(self) -> None:
        """A client the reputation guard holds may not start new sends (clients/send_guards.py)."""
        from clients.send_guards import register_send_guard
        from feedback.permissions import reputation_hold_refusal

        register_send_guard(reputation_hold_refusal)
