"""`python manage.py requeue_dead_letters [--since ISO] [--dry-run] [--batch-size N]`.

Sends dead letters again, each exactly once (the service stamps `requeued_at` under a row lock,
so a re-run or a concurrent run skips what is done: the command is resumable).
"""

from __future__ import annotations

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from core.ops import Progress, command_stderr, progress
from delivery.models import DeadLetter
from delivery.selectors import dead_letters_pending
from delivery.services.dead_letters import dead_letter_requeue


def _since(value: str | None) -> datetime | None:
    if not value:
        return None
    parsed = parse_datetime(value)
    if parsed is None:
        raise CommandError(f"--since: not an ISO datetime: {value!r}")
    return parsed


class Command(BaseCommand):
    help = "Send dead-lettered messages again, each exactly once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", help="only dead letters created at or after (ISO 8601)")
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def handle(self, *args, since: str | None, dry_run: bool, batch_size: int, **options) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be >= 1")
        pending = dead_letters_pending(since=_since(since))
        total = pending.count()
        if dry_run:
            self.stdout.write(f"{total} dead letters would be requeued")
            return
        bar = progress(total=total, desc="requeue", unit="letters", quiet=bool(options["quiet"]),
                       stream=command_stderr(options))
        try:
            requeued, skipped = self._requeue(pending, batch_size, bar)
        finally:
            bar.close()
        self.stdout.write(self.style.SUCCESS(f"{requeued} requeued, {skipped} skipped"))

    def _requeue(self, pending: QuerySet[DeadLetter], batch_size: int, bar: Progress) -> tuple[int, int]:
        requeued = skipped = 0
        last_id = 0
        while True:
            ids = list(pending.filter(id__gt=last_id).values_list("id", flat=True)[:batch_size])
            if not ids:
                break
            for dead_letter_id in ids:
                if dead_letter_requeue(dead_letter_id=dead_letter_id):
                    requeued += 1
                else:
                    skipped += 1
            last_id = ids[-1]
            bar.set_postfix_str(f"{skipped} skipped", refresh=False)
            bar.update(len(ids))
        return requeued, skipped
