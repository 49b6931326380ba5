from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"
    verbose_name = "Services and keys"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        # checks and schema: imported to register the system check and the OpenAPI auth extension
        from clients import checks, schema  # noqa: F401
        from clients.key_cache import forget_changed_credentials
        from clients.models import ApiKey, Service

        # A saved or deleted key or service is read again by this process's next request
        # (decision 53); other processes within NOTIFIER_API_KEY_CACHE_SECONDS.
        for model in (ApiKey, Service):
            post_save.connect(forget_changed_credentials, sender=model)
            post_delete.connect(forget_changed_credentials, sender=model)

        # The same for OAuth2 clients and their tokens (clients/oauth_cache.py).
        from oauth2_provider.models import AccessToken

        from clients.oauth_cache import forget_changed_oauth_credentials
        from clients.oauth_models import OAuthClient

        for model in (OAuthClient, AccessToken, Service):
            post_save.connect(forget_changed_oauth_credentials, sender=model)
            post_delete.connect(forget_changed_oauth_credentials, sender=model)
