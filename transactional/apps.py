from django.apps import AppConfig

BATCH_PATH = "/api/v1/messages/batch"


class TransactionalConfig(AppConfig):
    """The one-off send API: accept a message (now, later, at a local time) and answer fast."""

    name = "transactional"

    def ready(self) -> None:
        from django.conf import settings

        from core.api.middleware import body_limit_register

        # A batch's body is larger than any other request's: its own limit, its 413 names it.
        body_limit_register(BATCH_PATH, lambda: settings.NOTIFIER_BATCH_MAX_BODY_BYTES, "messages")
