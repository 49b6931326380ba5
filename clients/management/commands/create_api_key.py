"""python manage.py create_api_key NAME  -> prints the new key as the last line."""

from django.core.management.base import BaseCommand, CommandParser

from clients.services import api_client_create


class Command(BaseCommand):
    help = "Create an API client and print its key (shown once; only a hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: object, **options: object) -> None:
        client, key = api_client_create(name=str(options["name"]))
        self.stdout.write(f"Created API client {client.name!r} (prefix {client.prefix}).")
        self.stdout.write("Send it as the header  Authorization: Api-Key <key>")
        self.stdout.write(key)
