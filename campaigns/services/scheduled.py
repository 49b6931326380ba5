"""Scheduled campaigns (scheduled / local_time / optimal): the seam with the scheduling engine.

- The fan-out writes the rows SCHEDULED with their `scheduled_for` and adds them to the Redis due
  set after each chunk commits (scheduling.services.due.messages_schedule); a restarted fan-out
  re-adds them all (`campaign_scheduled_restore`, which skips ids a scheduler holds).
- The scheduler's dispatch moves the rows SCHEDULED -> QUEUED at their time and calls
  `campaigns_due_promote` with their campaigns: SCHEDULED -> SENDING (one guarded UPDATE), and
  the progress checks that complete the campaign start.
- A paused campaign's rows still fall due and are fenced QUEUED, but the workers' claim guard
  skips them (campaigns/claim_guard.py); resume re-publishes them (lifecycle.campaign_resume).
- Each one-off campaign has a scheduling.Schedule record (listed by GET /api/v1/schedules with
  its pending count); its `scheduled_at` becomes the earliest due time once the fan-out is done.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction
from django.db.models import Min
from django.utils import timezone

from campaigns.jobs import campaign_progress_check_later
from campaigns.models import Campaign
from delivery.models import EmailMessage
from scheduling.models import Schedule
from scheduling.services import due

CS = Campaign.Status
MS = EmailMessage.Status
RESTORE_CHUNK = 10_000
CAMPAIGN_TABLE = Campaign._meta.db_table


def campaign_scheduled_restore(*, campaign_id: int) -> int:
    """Every SCHEDULED row of the campaign back into the due set (idempotent); returns the count."""
    added = 0
    last_id = 0
    while True:
        rows = list(
            EmailMessage.objects.filter(campaign_id=campaign_id, status=MS.SCHEDULED, id__gt=last_id,
                                        scheduled_for__isnull=False)
            .order_by("id").values_list("id", "scheduled_for")[:RESTORE_CHUNK]
        )
        if not rows:
            return added
        added += due.due_restore(items=[(pk, when.timestamp()) for pk, when in rows])
        last_id = rows[-1][0]


def campaign_schedule_record_update(*, campaign_id: int) -> None:
    """The one-off Schedule record's scheduled_at/next_run: the earliest due row."""
    first = EmailMessage.objects.filter(campaign_id=campaign_id, status=MS.SCHEDULED).aggregate(
        at=Min("scheduled_for"))["at"]
    if first is not None:
        Schedule.objects.filter(campaign_id=campaign_id).exclude(type=Schedule.Type.RECURRING).update(
            scheduled_at=first, next_run=first, updated_at=timezone.now())
    else:
        # Nothing waits (every recipient suppressed, or all already due): the usual lifecycle
        # takes over, so the campaign cannot stay SCHEDULED with nothing left to fall due.
        campaigns_due_promote(campaign_ids=[campaign_id])


def campaign_schedule_records_close(*, campaign_id: int, status: str) -> None:
    """The campaign was cancelled: its one-off Schedule follows."""
    Schedule.objects.filter(campaign_id=campaign_id).exclude(status=Schedule.Status.CANCELLED).exclude(
        type=Schedule.Type.RECURRING).update(status=status, next_run=None, updated_at=timezone.now())


def campaign_schedule_records_set(*, campaign_id: int, old: str, new: str) -> None:
    """Pause/resume of a scheduled campaign shows on its one-off Schedule record."""
    Schedule.objects.filter(campaign_id=campaign_id, status=old).exclude(
        type=Schedule.Type.RECURRING).update(status=new, updated_at=timezone.now())


def campaigns_due_promote(*, campaign_ids: Iterable[int]) -> list[int]:
    """SCHEDULED -> SENDING for campaigns whose first rows were just dispatched."""
    ids = sorted({int(pk) for pk in campaign_ids if pk is not None})
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CAMPAIGN_TABLE} SET status = %s, started_at = COALESCE(started_at, %s) "
            "WHERE id = ANY(%s) AND status = %s RETURNING id",
            [CS.SENDING, timezone.now(), ids, CS.SCHEDULED],
        )
        promoted = [row[0] for row in cursor.fetchall()]
    if promoted:
        def _checks() -> None:
            for pk in promoted:
                campaign_progress_check_later(pk)

        transaction.on_commit(_checks)
    return promoted


def campaign_has_due_rows(*, campaign_id: int) -> bool:
    """True once any row of the campaign has fallen due (dispatched, or due and waiting)."""
    rows = EmailMessage.objects.filter(campaign_id=campaign_id)
    return rows.exclude(status=MS.SCHEDULED).exists() or rows.filter(
        status=MS.SCHEDULED, scheduled_for__lte=timezone.now()).exists()
