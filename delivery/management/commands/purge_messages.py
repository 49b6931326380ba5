"""python manage.py purge_messages --older-than DAYS [--batch-size 1000] [--dry-run]

Retention: deletes messages created more than DAYS ago that are in a final state (with their
attempts and events), oldest first, one batch per transaction. Messages still in flight
(QUEUED, SCHEDULED, SENDING, AMBIGUOUS) are never purged. Resumable: every committed batch
stays deleted; run the command again to continue. Expired Idempotency-Key records go too, and
the service event log's events older than NOTIFIER_EVENT_LOG_DAYS (the scheduler also expires
them, a bounded step a minute).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from clients.models import IdempotencyRecord
from core.ops import command_stderr, id_batches, progress
from delivery.models import EmailMessage
from eventlog.expiry import events_expire, expiry_cutoff

Status = EmailMessage.Status
IN_FLIGHT = (Status.QUEUED, Status.SCHEDULED, Status.SENDING, Status.AMBIGUOUS)


class Command(BaseCommand):
    help = "Delete final-state messages older than N days (batched, resumable)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=int, required=True, metavar="DAYS")
        parser.add_argument("--batch-size", type=int, default=1000)
        parser.add_argument("--dry-run", action="store_true", help="count only")
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def handle(self, *args: object, **options: Any) -> None:
        if options["older_than"] < 1:
            raise CommandError("--older-than must be at least 1 day")
        cutoff = timezone.now() - timedelta(days=options["older_than"])
        old = EmailMessage.objects.filter(created_at__lt=cutoff).exclude(status__in=IN_FLIGHT)
        total = old.count()
        if options["dry_run"]:
            self.stdout.write(f"would purge {total} messages created before {cutoff:%Y-%m-%d %H:%M}")
            return
        bar = progress(total=total, desc="purge", quiet=options["quiet"], stream=command_stderr(options))
        purged = 0
        for rows in id_batches(old, batch_size=options["batch_size"], fields=("id",)):
            with transaction.atomic():
                # Re-check the filter inside the delete: a row that moved on since is kept.
                _, per_model = old.filter(id__in=[row["id"] for row in rows]).delete()
            purged += per_model.get(EmailMessage._meta.label, 0)
            bar.update(len(rows))
        bar.close()
        expired, _ = IdempotencyRecord.objects.filter(expires_at__lt=timezone.now()).delete()
        events = events_expire(older_than=expiry_cutoff(), batch_size=options["batch_size"])
        self.stdout.write(f"purged {purged} messages, {expired} expired idempotency records, "
                          f"{events} expired events")
