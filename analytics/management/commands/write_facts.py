"""python manage.py write_facts [--day YYYY-MM-DD | --from YYYY-MM-DD [--to YYYY-MM-DD]]

Writes the daily facts (decision 118) of UTC days from the message rows: each day in its own
transaction, again if it was written before (an idempotent upsert); today is written so far.
Without an argument: what the periodic run writes (today, the rewrite window's days due, up to a
week of days never written). A day whose rows may be gone (before the metadata retention) is left
as it is and said so; a future day is refused. Resumable: every day written stays written.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analytics.horizon import utc_today
from analytics.services.facts import facts_days_to_write, facts_write_day


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as error:
        raise CommandError(f"{value!r} is not a date (YYYY-MM-DD)") from error


class Command(BaseCommand):
    help = "Write the daily facts of UTC days from the message rows (backfill, repair)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--day", help="one day, YYYY-MM-DD (UTC)")
        parser.add_argument("--from", dest="day_from", help="the first day of a range")
        parser.add_argument("--to", dest="day_to", help="the last day of a range (default: yesterday)")

    def handle(self, *args: object, **options: Any) -> None:
        days = self._days(options)
        for position, day in enumerate(days, 1):
            result = facts_write_day(day)
            if result.skipped:
                note = "skipped: older than every service's metadata retention (its rows may be gone)"
            else:
                note = f"{result.rows:,} rows, {result.deleted:,} deleted, {result.seconds:.1f} s"
                if result.skipped_services:
                    note += (f"; {len(result.skipped_services)} services past their retention "
                             "left as they were")
            self.stdout.write(f"[{position}/{len(days)}] {day}: {note}")

    def _days(self, options: dict[str, Any]) -> list[date]:
        today = utc_today()
        if options["day"] and (options["day_from"] or options["day_to"]):
            raise CommandError("give --day, or --from/--to, not both")
        if options["day"]:
            first = last = _day(options["day"])
        elif options["day_from"]:
            first = _day(options["day_from"])
            last = _day(options["day_to"]) if options["day_to"] else today - timedelta(days=1)
        elif options["day_to"]:
            raise CommandError("--to needs --from")
        else:
            return facts_days_to_write()
        if last > today:
            raise CommandError(f"{last} has not begun yet: today is {today} (UTC)")
        if first > last:
            raise CommandError("--from is after --to")
        return [first + timedelta(days=n) for n in range((last - first).days + 1)]
