"""python manage.py create_api_key NAME [--scopes send,campaigns] [--rate 100/min]

Prints the new key as the last line (scripts take `| tail -1`). Without --scopes the client gets
every non-admin scope; without --rate, the default rate (NOTIFIER_API_DEFAULT_RATE).
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clients.rates import parse_rate
from clients.scopes import default_scopes, parse_scopes
from clients.services import api_client_create


class Command(BaseCommand):
    help = "Create an API client and print its key (shown once; only a hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--scopes", default=",".join(default_scopes()),
                            help="comma-separated: send,campaigns,schedules,analytics,admin")
        parser.add_argument("--rate", default="", help="e.g. 100/min (N/s, N/min, N/hour)")

    def handle(self, *args: object, **options: object) -> None:
        try:
            scopes = parse_scopes(str(options["scopes"]))
            if options["rate"]:
                parse_rate(str(options["rate"]))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        client, key = api_client_create(
            name=str(options["name"]), scopes=scopes, rate_limit=str(options["rate"])
        )
        rate = client.rate_limit or "default"
        self.stdout.write(f"Created API client {client.name!r} (prefix {client.prefix}), "
                          f"scopes {','.join(client.scopes)}, rate {rate}.")
        self.stdout.write("Send it as the header  Authorization: Api-Key <key>")
        self.stdout.write(key)
