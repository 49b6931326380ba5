"""python manage.py expire_data [--as-of DATETIME] [--batch-size N] [--dry-run]

Personal-data removal after each service's retention (decision 120), all of it at once: the
scheduler removes the same in bounded steps (a second a minute); this is for an operator
catching up (after a long outage of the scheduler, or a retention shortened by a lot) and for
tests. Messages created before `as-of` minus their service's personal retention of their stream
lose their address, context and the ESP's payloads (settled rows only: never one in flight);
then the event log's copies, the ESP events no message batch reached, the webhook bodies and
the inline recipients of campaigns that ended, and of recurring schedules cancelled, before
their service's broadcast cutoff.
Batches of --batch-size, one transaction each: interrupted, run it again. `--dry-run` counts
what would be removed and changes nothing.

Then the whole days past every service's metadata retention: the day partitions of messages,
attempts, ESP events and marks are detached and dropped (decision 122), as the hourly
`delivery.partitions_upkeep` does; a day still holding a message in flight is kept and named.
On a table not yet partitioned (`manage.py partition_tables`) nothing is dropped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clients.history_expiry import history_expire, history_horizon
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
        self._history(as_of, dry_run=options["dry_run"])

    def _history(self, as_of: datetime, *, dry_run: bool) -> None:
        dropped = history_expire(as_of, dry_run=dry_run)
        horizon = history_horizon(as_of).isoformat(timespec="seconds")
        for day in dropped:
            if day.kept_in_flight:
                self.stdout.write(f"kept {day.partition}: past retention, but a message in it is in flight")
            else:
                verb = "would drop" if dry_run else "dropped"
                self.stdout.write(f"{verb} {day.partition} (~{day.rows} rows, {day.seconds * 1000:.0f} ms)")
        if not any(not day.kept_in_flight for day in dropped):
            self.stdout.write(f"no day partition is older than {horizon}")
