"""The message status state machine, driven by what the ESPs reported (guarded, batched).

Status is derived from the *set* of first occurrences per message (MessageEventMark), ranked:

    SENT < DELIVERED < OPENED < CLICKED < BOUNCED (hard) < COMPLAINED < FAILED (dropped)

The ledger applies the whole batch in one guarded UPDATE (delivery/services/ledger/reported.py
`reported_statuses_apply`) that only moves a status up the ranks, so arrival order does not
matter, a repeated event changes nothing, and a hard bounce or complaint is never undone by a
later open or delivery. A drop (the ESP accepted the message, then never attempted it) ranks
last: the message was not sent, whatever else arrives, and a row the send path already marked
FAILED stays as it is. Timestamps take the earliest reported time.

A message still SENDING (the webhook overtook the worker's own "accepted" write) is left for
the worker's guarded write to finish first; its id is returned so the caller re-applies later.
An AMBIGUOUS message is proof of acceptance: it is reconciled to SENT first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from delivery.models import EmailMessage
from delivery.services import ledger
from delivery.services.ledger import REPORTED_RANK
from delivery.services.reconcile import message_reconcile
from feedback.services.events import StoredEvent
from feedback.services.marks import marks_for_messages

logger = logging.getLogger(__name__)
Status = EmailMessage.Status

_STATUS_FOR_MARK = {
    "delivered": Status.DELIVERED,
    "opened": Status.OPENED,
    "clicked": Status.CLICKED,
    "bounced": Status.BOUNCED,
    "complained": Status.COMPLAINED,
    "dropped": Status.FAILED,
}
_TIMESTAMP_FOR_MARK = {
    "delivered": "delivered_at",
    "opened": "opened_at",
    "clicked": "clicked_at",
    "bounced": "bounced_at",
}


def target_status(marks: dict[str, datetime]) -> str | None:
    candidates = [_STATUS_FOR_MARK[m] for m in marks if m in _STATUS_FOR_MARK]
    return max(candidates, key=REPORTED_RANK.__getitem__) if candidates else None


def message_statuses_apply(*, message_ids: Sequence[int]) -> list[int]:
    """Bring these messages' status and timestamps in line with their marks.

    Returns the ids still SENDING (to re-apply once the worker has recorded acceptance).
    """
    facts = marks_for_messages(sorted(set(message_ids)))
    if not facts:
        return []
    _apply_marks(facts)
    return list(
        EmailMessage.objects.filter(id__in=list(facts), status=Status.SENDING).values_list("id", flat=True)
    )


def _apply_marks(facts: dict[int, dict[str, datetime]]) -> None:
    """Each message's target status and first timestamps, applied by the ledger in one UPDATE."""
    ledger.reported_statuses_apply(targets={
        message_id: (target_status(marks),
                     {column: marks.get(mark) for mark, column in _TIMESTAMP_FOR_MARK.items()})
        for message_id, marks in facts.items()
    })


def ambiguous_messages_reconcile(*, events: Sequence[StoredEvent]) -> int:
    """AMBIGUOUS -> SENT: an ESP event about a message proves the ESP accepted it.

    One event per message (the first of the batch, sorted by id) is the evidence; the delivery
    app's guarded `message_reconcile` makes the change and logs it (it also settles rows still
    SENDING after hand-off).
    """
    first: dict[int, StoredEvent] = {}
    for stored in events:
        first.setdefault(stored.message.id, stored)
    changed = sum(
        message_reconcile(message_id=pk, accepted=True, provider=s.event.provider,
                          provider_message_id=s.event.provider_message_id or "",
                          evidence={"event": s.event.event_type.value,
                                    "provider_event_id": s.event.provider_event_id[:255],
                                    "occurred_at": s.event.occurred_at.isoformat()})
        for pk, s in sorted(first.items())
    )
    if changed:
        logger.info("reconciled %d ambiguous messages from webhook events", changed)
    return changed
