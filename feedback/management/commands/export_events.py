"""python manage.py export_events --since 2026-11-01 [--until ...] [--format csv|jsonl]
                                [--output FILE] [--after-id N | --resume] [--batch-size 5000]
                                [--dry-run]

Streams ESP events (feedback.EmailEvent) in id order, one keyset batch at a time (constant
memory, no OFFSET). Resumable: `--resume` with an existing --output reads the last exported id
from the file's last line and appends after it; or pass --after-id from the "exported through
id N" line the command prints on stderr.
"""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, time
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from core.ops import command_stderr, id_batches, progress
from feedback.models import EmailEvent

FIELDS = ("id", "message_id", "provider", "provider_event_id", "event_type", "bounce_type",
          "recipient", "url", "occurred_at", "received_at")


def _moment(text: str) -> datetime:
    value = parse_datetime(text) or (
        datetime.combine(parse_date(text), time.min) if parse_date(text) else None)
    if value is None:
        raise CommandError(f"Not a date or ISO 8601 time: {text!r}")
    return timezone.make_aware(value, UTC) if timezone.is_naive(value) else value


def _last_exported_id(path: Path, fmt: str) -> int:
    """The id on the file's last complete line (0 for an empty or header-only file)."""
    last = ""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                last = line
    if not last or last.startswith("id,"):
        return 0
    try:
        return int(json.loads(last)["id"]) if fmt == "jsonl" else int(last.split(",", 1)[0])
    except (ValueError, KeyError) as exc:
        raise CommandError(f"Cannot resume: the last line of {path} is not an event") from exc


class Command(BaseCommand):
    help = "Export ESP events since a date as CSV or JSON lines (streaming, resumable)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", required=True, help="date or ISO 8601 time (UTC if naive)")
        parser.add_argument("--until", help="exclusive upper bound")
        parser.add_argument("--format", choices=["csv", "jsonl"], default="jsonl")
        parser.add_argument("--output", type=Path, help="file (default: stdout)")
        parser.add_argument("--after-id", type=int, default=0)
        parser.add_argument("--resume", action="store_true", help="append after --output's last id")
        parser.add_argument("--batch-size", type=int, default=5000)
        parser.add_argument("--dry-run", action="store_true", help="count only")
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def handle(self, *args: object, **options: Any) -> None:
        events = EmailEvent.objects.filter(occurred_at__gte=_moment(options["since"]))
        if options["until"]:
            events = events.filter(occurred_at__lt=_moment(options["until"]))
        after_id = options["after_id"]
        output: Path | None = options["output"]
        resuming = bool(options["resume"] and output and output.exists())
        if options["resume"] and not output:
            raise CommandError("--resume needs --output")
        if resuming:
            after_id = max(after_id, _last_exported_id(output, options["format"]))
        total = events.filter(id__gt=after_id).count()
        if options["dry_run"]:
            self.stderr.write(f"would export {total} events after id {after_id}", style_func=str)
            return
        handle: IO[str] = output.open("a" if resuming else "w", encoding="utf-8", newline="") \
            if output else self.stdout
        try:
            written = self._write(events, handle, after_id=after_id, header=not resuming,
                                  options=options, total=total)
        finally:
            if output:
                handle.close()
        # stderr because stdout may carry the events; plain, not in the red of an error
        self.stderr.write(f"exported {written} events", style_func=str)

    def _write(self, events: Any, handle: IO[str], *, after_id: int, header: bool,
               options: dict[str, Any], total: int) -> int:
        writer = csv.writer(handle) if options["format"] == "csv" else None
        if writer and header:
            writer.writerow(FIELDS)
        bar = progress(total=total, desc="export", quiet=options["quiet"],
                       stream=command_stderr(options))
        written = 0
        for rows in id_batches(events, batch_size=options["batch_size"], after_id=after_id,
                               fields=FIELDS):
            for row in rows:
                values = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}
                if writer:
                    writer.writerow([values[name] for name in FIELDS])
                else:
                    handle.write(json.dumps(values) + "\n")
            handle.flush()
            written += len(rows)
            bar.update(len(rows))
            bar.note(f"exported through id {rows[-1]['id']}")
        bar.close()
        return written
