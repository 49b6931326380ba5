"""python manage.py expire_data [--as-of DATETIME] [--batch-size N] [--dry-run]

Personal-data removal after each service's retention (decision 120), all of it at once: the
scheduler removes the same in bounded steps (a second a minute); this is for an operator
catching up (after a long outage of the scheduler, or a retention shortened by a lot) and for
tests. Messages created before `as-of` minus their service's personal retention of their stream
lose their address, context and the ESP's payloads (settled rows only: never one in flight);
then the event log's copies, the ESP events no message batch reached and the webhook bodies.
Batches of --batch-size, one transaction each: interrupted, run it again. `--dry-run` counts
what would be removed and changes nothing. `purge_messages` (deleting whole rows) is separate.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clients.personal_data import DEFAULT_BATCH, personal_data_expire


def _as_of(text: str | None) -> datetime:
    if not text:
        return timezone.now()
    value = parse_datetime(text)
    if value is None:
        raise CommandError(f"--as-of: not an ISO 8601 date and time: {text!r}")
    return value if timezone.is_aware(value) else timezone.make_aware(value, timezone.get_default_timezone())


class Command(BaseCommand):
    help = "Remove personal data past each service's retention (batched, resumable; --dry-run counts)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--as-of", default=None, metavar="DATETIME",
                            help="ISO 8601 (default: now); a naive time is in TIME_ZONE")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, metavar="N")
        parser.add_argument("--dry-run", action="store_true", help="count only, change nothing")

    def handle(self, *args: object, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        as_of = _as_of(options["as_of"])
        done = personal_data_expire(as_of=as_of, batch_size=options["batch_size"],
                                    dry_run=options["dry_run"])
        verb = "would remove personal data from" if options["dry_run"] else "removed personal data from"
        parts = ", ".join(f"{rows} {what.replace('_', ' ')}" for what, rows in done.items())
        self.stdout.write(f"{verb} {parts or 'nothing'} (as of {as_of.isoformat(timespec='seconds')})")
