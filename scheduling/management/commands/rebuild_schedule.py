"""python manage.py rebuild_schedule [--batch-size N] [--dry-run]: refill the Redis due set from
the SCHEDULED rows in PostgreSQL (after a Redis flush or failover). Safe to repeat."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from core.ops import command_stderr, progress
from delivery.models import EmailMessage
from scheduling.services.rebuild import schedule_rebuild


class Command(BaseCommand):
    help = "Rebuild the scheduler's Redis due set from PostgreSQL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=5000)
        parser.add_argument("--dry-run", action="store_true", help="count, write nothing")
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def handle(self, *args: object, **options: object) -> None:
        dry_run = bool(options["dry_run"])
        verb = "would be added" if dry_run else "added"

        # The bar's total only: rows scheduled meanwhile are read too (the count is a moment's).
        total = EmailMessage.objects.filter(status=EmailMessage.Status.SCHEDULED).count()
        bar = progress(total=total, desc="rebuild", quiet=bool(options["quiet"]),
                       stream=command_stderr(options))

        def advance(seen: int, added: int) -> None:
            bar.set_postfix_str(f"{added} {verb}", refresh=False)
            bar.advance_to(seen)

        try:
            seen, added = schedule_rebuild(
                batch_size=int(options["batch_size"]), dry_run=dry_run, progress=advance
            )
        finally:
            bar.close()
        if dry_run:
            self.stdout.write(self.style.SUCCESS(
                f"{seen} scheduled messages; {added} would be added or re-scored (dry run, nothing written)"))
        else:
            self.stdout.write(self.style.SUCCESS(f"{seen} scheduled messages; {added} added or re-scored"))
