from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"
    verbose_name = "API clients"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        # checks and schema: imported to register the system check and the OpenAPI auth extension
        from clients import checks, schema  # noqa: F401
        from clients.key_cache import forget_changed_client
        from clients.models import ApiClient

        # A saved or deleted client is read again by this process's next request (decision 53).
        post_save.connect(forget_changed_client, sender=ApiClient)
        post_delete.connect(forget_changed_client, sender=ApiClient)
