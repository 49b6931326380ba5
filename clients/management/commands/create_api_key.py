"""python manage.py create_api_key NAME [--service SERVICE] [--type live|team|test]
                                        [--scopes send,campaigns] [--rate 100/min]

Without --service: a new service called NAME with its first key (today's form). With --service
(its id, name or a key's prefix): a new key NAME of that service, whose scopes must be the
service's or fewer and whose --rate may only be lower than the service's. Prints the new key as
the last line (scripts take `| tail -1`); it is shown once, only a hash is stored.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clients.key_types import KeyType
from clients.rates import parse_rate
from clients.scopes import parse_scopes
from clients.services import KeyRefusedError, api_key_create, service_create
from clients.tenancy import service_by_reference


class Command(BaseCommand):
    help = "Create an API key (and, without --service, its service); print the key once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--service", default="",
                            help="add the key to this service (id, name or a key's prefix)")
        parser.add_argument("--type", default=KeyType.LIVE, choices=KeyType.values,
                            help="live (default), team (team list only), test (sends nothing)")
        parser.add_argument("--scopes", default=None,
                            help="comma-separated: send,campaigns,schedules,analytics,keys,admin "
                                 "(default: every scope of the service; a new service: all but admin)")
        parser.add_argument("--rate", default="", help="e.g. 100/min (N/s, N/min, N/hour)")

    def handle(self, *args: object, **options: object) -> None:
        name, key_type = str(options["name"]), str(options["type"])
        try:
            scopes = parse_scopes(str(options["scopes"])) if options["scopes"] is not None else None
            rate = str(options["rate"])
            if rate:
                parse_rate(rate)
            if options["service"]:
                service = service_by_reference(str(options["service"]))
                api_key, key = api_key_create(service=service, name=name, key_type=key_type,
                                              scopes=scopes, rate_limit=rate, created_by="command")
            else:
                service, key = service_create(name=name, scopes=scopes, rate_limit=rate,
                                              key_type=key_type, created_by="command")
                api_key = service.api_keys.get()
        except ValueError as exc:  # KeyRefusedError is one
            option = {"rate_limit": "rate", "expiry_date": "expires"}.get(getattr(exc, "field", ""),
                                                                          getattr(exc, "field", ""))
            field = f"--{option}: " if isinstance(exc, KeyRefusedError) else ""
            raise CommandError(f"{field}{exc}") from exc
        self.stdout.write(
            f"Created {api_key.key_type} API key {api_key.name!r} (prefix {api_key.prefix}) of "
            f"service {service.name!r} ({service.pk}), scopes {','.join(api_key.scopes)}, "
            f"rate {api_key.rate_limit or service.rate_limit or 'default'}.")
        self.stdout.write("Send it as the header  Authorization: Api-Key <key>")
        self.stdout.write(key)
