"""python manage.py import_suppressions FILE.csv [--reason manual] [--source NAME]
                                     [--batch-size 1000] [--start-line N] [--dry-run]

The CSV has a header row with an `email` column (and optional `reason`, `source`). Each batch is
one INSERT ... ON CONFLICT DO NOTHING in its own transaction, so an interrupted import is resumed
by running the same command again (rows already there are skipped), or with --start-line from the
last "committed through line N" it printed. Invalid addresses are counted and reported, never
imported.
"""

from __future__ import annotations

import csv
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_email
from django.db import transaction

from audience.models import Suppression
from core.api.fields import has_line_break
from core.ops import Progress, command_stderr, progress


def _clean(address: str) -> str | None:
    address = address.strip().lower()
    if not address or has_line_break(address):
        return None
    try:
        validate_email(address)
    except ValidationError:
        return None
    return address


class Command(BaseCommand):
    help = "Import suppressed addresses from a CSV file (resumable, idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--reason", default=Suppression.Reason.MANUAL, choices=Suppression.Reason.values)
        parser.add_argument("--source", default="import", help="recorded on each row")
        parser.add_argument("--batch-size", type=int, default=1000)
        parser.add_argument("--start-line", type=int, default=2, help="first data line (1 = header)")
        parser.add_argument("--dry-run", action="store_true", help="validate and count, write nothing")
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def handle(self, *args: object, **options: object) -> None:
        path: Path = options["file"]
        if not path.exists():
            raise CommandError(f"No such file: {path}")
        totals = {"read": 0, "invalid": 0, "imported": 0}
        self._seen: set[str] = set()
        invalid_examples: list[str] = []
        with path.open("rb") as raw:
            lines = max(sum(1 for _ in raw) - 1, 0)  # one quick pass: the bar's total
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            if "email" not in (reader.fieldnames or []):
                raise CommandError("The CSV needs a header row with an 'email' column.")
            bar = progress(total=lines, desc="import", quiet=options["quiet"],
                           stream=command_stderr(options))
            batch: list[Suppression] = []
            for line, row in enumerate(reader, start=2):
                bar.update(1)
                if line < options["start_line"]:
                    continue
                totals["read"] += 1
                email = _clean(row.get("email") or "")
                if email is None:
                    totals["invalid"] += 1
                    if len(invalid_examples) < 5:
                        invalid_examples.append(f"line {line}: {row.get('email')!r}")
                    continue
                reason = row.get("reason") if row.get("reason") in Suppression.Reason.values \
                    else options["reason"]
                batch.append(Suppression(email=email, reason=reason,
                                         source=(row.get("source") or options["source"])[:100]))
                if len(batch) >= options["batch_size"]:
                    totals["imported"] += self._flush(batch, options["dry_run"], line, bar)
                    batch = []
            totals["imported"] += self._flush(batch, options["dry_run"], "end", bar)
            bar.close()
        for example in invalid_examples:
            self.stderr.write(f"invalid address, skipped: {example}")
        verb = "would import" if options["dry_run"] else "imported"
        self.stdout.write(f"read {totals['read']}, invalid {totals['invalid']}, {verb} "
                          f"{totals['imported']} new suppressions")

    def _flush(self, batch: list[Suppression], dry_run: bool, line: int | str, bar: Progress) -> int:
        if not batch:
            return 0
        emails = {row.email for row in batch} - self._seen
        live = Suppression.objects.filter(email__in=emails, sandbox=False)
        existing = set(live.values_list("email", flat=True))
        new = len(emails - existing)
        self._seen |= emails  # a repeat later in the file is not new (also in a dry run)
        if not dry_run:
            with transaction.atomic():
                Suppression.objects.bulk_create(batch, ignore_conflicts=True)
            bar.note(f"committed through line {line}")
        return new
