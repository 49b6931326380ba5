from django.apps import AppConfig


class TransactionalConfig(AppConfig):
    """The one-off send API: accept a message (now, later, at a local time) and answer fast."""

    name = "transactional"
