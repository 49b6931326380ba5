"""AMBIGUOUS rows as the send path and the recovery leave them, and the send tasks a re-send
queues (tests/delivery/test_ambiguity*.py): real ledger writes, a real Redis broker."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.utils import timezone

from core.priorities import Priority, queue_for
from delivery.models import EmailMessage
from delivery.providers.events import EventType
from delivery.services import ledger
from delivery.services.ambiguity import ambiguity_held
from feedback.services.processing import events_process
from tests.factories import email_message
from tests.feedback.helpers import event
from tests.support.broker_messages import broker_messages


def queued_tasks(priority: int = 0) -> list[list]:
    """The argument lists of the send tasks waiting on a priority's queue (real Redis broker)."""
    queue = queue_for(Priority(priority))
    return [m.args for m in broker_messages([queue]) if m.where == queue]


def handed_over(provider: str, *, at: datetime | None = None, **fields) -> EmailMessage:
    """A message claimed and handed to `provider` at `at` (a worker that then died mid-call)."""
    message = email_message(**fields)
    token = uuid.uuid4().hex
    ledger.messages_claim(message_ids=[message.id], token=token)
    ledger.messages_mark_started(message_ids=[message.id], token=token, provider=provider,
                                 started_at=at or timezone.now())
    return message


def stalled_messages_recover_at(now: datetime) -> None:
    """The recovery's stalled-send mark, as it runs once the hand-off is older than the limit."""
    ambiguity_held(rows=ledger.stalled_sends_mark_ambiguous(started_before=now), reason="worker_lost")


def worker_lost(provider: str, *, at: datetime, **fields) -> EmailMessage:
    """A message handed to `provider` at `at` whose worker died: AMBIGUOUS (`worker_lost`)."""
    message = handed_over(provider, at=at, **fields)
    stalled_messages_recover_at(at + timedelta(hours=1))
    return message


def sent_with_event(provider: str, *, at: datetime) -> EmailMessage:
    """A message handed over at `at` and accepted, whose ESP event then arrived: the provider's
    events now cover sends handed over until `at` (decision 89)."""
    message = handed_over(provider, at=at)
    EmailMessage.objects.filter(id=message.id).update(status=EmailMessage.Status.SENT, provider=provider)
    events_process(events=[event(message, EventType.DELIVERED, provider=provider)])
    return message
