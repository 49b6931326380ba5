"""python manage.py import_contacts FILE.csv --service NAME [--list NAME] [--batch-size N] [--dry-run]

Resumable: run it again after an interruption and it continues after the last committed batch
(progress is kept per client and file, keyed by path, size and modification time). The contacts
(and the list) belong to the service `--service` names (decision 50; `--client` is its old name).
A `topic:<name>` column holds each row's choice for that topic of the service: yes or no (empty:
unchanged), applied with source import (issue 28; docs/api.md "Consent").
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audience.services.importer import contacts_import, file_row_count
from clients.tenancy import service_by_reference
from core.ops import command_stderr, progress


class Command(BaseCommand):
    help = ("Import contacts from a CSV file (email column required; `topic:<name>` columns are topic "
            "choices, yes/no; other columns become attributes).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--service", "--client", dest="service", required=True,
                            help="the service (id, name or a key's prefix) that owns the contacts")
        parser.add_argument("--list", default="", help="also add every imported contact to this list")
        parser.add_argument("--batch-size", type=int, default=50_000)
        parser.add_argument("--dry-run", action="store_true", help="validate and count; write nothing")
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def handle(self, *args: object, **options: object) -> None:
        path = str(options["file"])
        try:
            owner = service_by_reference(str(options["service"]))
            total = file_row_count(path)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        bar = progress(total=total, desc="import", quiet=bool(options["quiet"]),
                       stream=command_stderr(options))
        started = time.monotonic()
        try:
            report = contacts_import(
                client_id=owner.pk, path=path, list_name=str(options["list"]),
                batch_size=int(options["batch_size"]),
                dry_run=bool(options["dry_run"]), on_progress=bar.advance_to,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bar.close()
        for error in report.errors:
            self.stderr.write(error)
        if options["dry_run"]:
            verb, written = "would write", report.rows - report.invalid
        else:
            verb, written = "wrote", report.written
        self.stdout.write(
            f"{report.rows} rows read, {verb} {written}, "
            f"{report.invalid} invalid, {report.skipped} skipped (already imported) "
            f"in {time.monotonic() - started:.1f} s"
        )
