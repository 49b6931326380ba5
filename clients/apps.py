from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"
    verbose_name = "API clients"

    def ready(self) -> None:
        from clients import schema  # noqa: F401 - registers the OpenAPI auth extension
