"""Cancel future sends before they leave.

The cancel is one guarded UPDATE (SCHEDULED -> CANCELLED). The dispatcher's fence is another
guarded UPDATE on the same rows (SCHEDULED -> QUEUED); PostgreSQL's row lock orders the two at
the due second and the loser matches nothing. So the answer is exact: a message counted as
cancelled is never published, one counted as already dispatched was.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from delivery.models import EmailMessage
from delivery.services import ledger
from scheduling.services import due

Status = EmailMessage.Status


@dataclass(frozen=True)
class CancelResult:
    cancelled: list[int]
    already_dispatched: int


def _forget(ids: list[int]) -> list[int]:
    """Drop cancelled ids from the due set once the cancel commits."""
    if ids:
        transaction.on_commit(lambda: due.due_remove(message_ids=ids))
    return ids


def messages_cancel_by_key(*, client_id: int, cancel_key: str) -> CancelResult:
    """Cancel this client's not-yet-dispatched messages carrying `cancel_key`."""
    with transaction.atomic():
        ids = _forget(ledger.scheduled_messages_cancel(
            client_id=client_id, cancel_key=cancel_key, reason="cancelled by cancel_key"))
    others = EmailMessage.objects.filter(client_id=client_id, cancel_key=cancel_key).exclude(
        status__in=[Status.CANCELLED, Status.SCHEDULED]).count()
    return CancelResult(cancelled=ids, already_dispatched=others)


def campaign_messages_cancel(*, campaign_id: int) -> list[int]:
    """Cancel a campaign's messages still waiting for their time (its schedule was cancelled)."""
    with transaction.atomic():
        return _forget(ledger.scheduled_messages_cancel(campaign_id=campaign_id, reason="schedule cancelled"))
