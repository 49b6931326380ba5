"""python manage.py create_oauth_client NAME --service SERVICE [--scopes send,campaigns]

A new OAuth2 client NAME of SERVICE (its id, name or a key's prefix), with the service's scopes
or fewer (decision 104). Prints the client id, then the secret as the last line (scripts take
`| tail -1`); the secret is shown once, only a hash is stored.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clients.oauth_services import oauth_client_create
from clients.scopes import parse_scopes
from clients.services import KeyRefusedError
from clients.tenancy import service_by_reference


class Command(BaseCommand):
    help = "Create an OAuth2 client (client credentials) of a service; print its secret once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--service", required=True,
                            help="the client's service (id, name or a key's prefix)")
        parser.add_argument("--scopes", default=None,
                            help="comma-separated: send,campaigns,schedules,analytics,keys,admin "
                                 "(default: every scope of the service)")

    def handle(self, *args: object, **options: object) -> None:
        try:
            scopes = parse_scopes(str(options["scopes"])) if options["scopes"] is not None else None
            service = service_by_reference(str(options["service"]))
            client, secret = oauth_client_create(service=service, name=str(options["name"]),
                                                 scopes=scopes, created_by="command")
        except ValueError as exc:  # KeyRefusedError is one
            field = f"--{exc.field}: " if isinstance(exc, KeyRefusedError) else ""
            raise CommandError(f"{field}{exc}") from exc
        self.stdout.write(
            f"Created OAuth client {client.name!r} of service {service.name!r} ({service.pk}), "
            f"scopes {','.join(client.scopes)}.")
        self.stdout.write("Get a token: POST /oauth/token with grant_type=client_credentials and "
                          "HTTP Basic client_id:client_secret; send it as  Authorization: Bearer <token>")
        self.stdout.write(f"client_id {client.client_id}")
        self.stdout.write(secret)
