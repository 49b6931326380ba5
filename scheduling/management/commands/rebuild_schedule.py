"""python manage.py rebuild_schedule [--batch-size N] [--dry-run]: refill the Redis due set from
the SCHEDULED rows in PostgreSQL (after a Redis flush or failover). Safe to repeat."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from scheduling.services.rebuild import schedule_rebuild


class Command(BaseCommand):
    help = "Rebuild the scheduler's Redis due set from PostgreSQL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=5000)
        parser.add_argument("--dry-run", action="store_true", help="count, write nothing")

    def handle(self, *args: object, **options: object) -> None:
        dry_run = bool(options["dry_run"])
        verb = "would be added" if dry_run else "added"

        def progress(seen: int, added: int) -> None:
            self.stdout.write(f"  {seen} scheduled rows read, {added} {verb}")

        seen, added = schedule_rebuild(
            batch_size=int(options["batch_size"]), dry_run=dry_run, progress=progress
        )
        if dry_run:
            self.stdout.write(self.style.SUCCESS(
                f"{seen} scheduled messages; {added} would be added or re-scored (dry run, nothing written)"))
        else:
            self.stdout.write(self.style.SUCCESS(f"{seen} scheduled messages; {added} added or re-scored"))
