from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"
    verbose_name = "API clients"

    def ready(self) -> None:
        from clients import checks, schema  # noqa: F401 - register the system check and the
        # OpenAPI auth extension
