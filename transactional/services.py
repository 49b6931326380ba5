"""Create transactional messages (the POST /api/v1/messages path).

The unique idempotency key makes the insert itself the duplicate check: a repeated call with the
same key returns the first message and enqueues nothing. A suppressed recipient is recorded as
SUPPRESSED and never enqueued. The task is published only after the row commits, so a worker can
never look for a row that is not there yet.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from rest_framework import exceptions, status

from audience.selectors import email_is_suppressed
from clients.models import ApiClient
from core.priorities import Priority
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from scheduling.services.due import messages_schedule
from templates.models import TemplateVersion

Status = EmailMessage.Status
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MessageCreated:
    message: EmailMessage
    replayed: bool


def _enqueue_after_commit(message_id: int, priority: Priority) -> None:
    """The row is durable; if the broker is down the recovery loop publishes it later."""
    try:
        messages_enqueue(message_ids=[message_id], priority=priority)
    except Exception:
        logger.exception("could not publish message %s; recovery will retry", message_id)


def _schedule_after_commit(message_id: int, due_at: datetime) -> None:
    """The row (SCHEDULED, scheduled_for) is the record; if Redis is down, the scheduler's
    overdue sweep or `rebuild_schedule` puts it back in the due set."""
    try:
        messages_schedule(items=[(message_id, due_at)])
    except Exception:
        logger.exception("could not add message %s to the due set; the sweep will", message_id)


def client_idempotency_key(client: ApiClient, key: str | None) -> str:
    """Callers' keys are scoped to the caller; without one every call is new."""
    return f"client:{client.pk}:{key}" if key else f"auto:{uuid.uuid4().hex}"


class IdempotencyKeyReusedError(exceptions.APIException):
    """The key was first used for a different message: a 409, as for the `Idempotency-Key`
    header (clients/idempotency.py); replaying the first would silently drop this one."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "This idempotency_key was used with a different request."


def _replay(key: str, request: dict) -> MessageCreated:
    """The message first created under `key`, if `request` is the same one."""
    existing = EmailMessage.objects.select_related("template_version").get(idempotency_key=key)
    stored = {"recipient": existing.recipient, "template_id": existing.template_version.template_id,
              "context": existing.context, "priority": existing.priority,
              "scheduled": existing.scheduled_for is not None, "cancel_key": existing.cancel_key}
    if stored != request:
        raise IdempotencyKeyReusedError
    return MessageCreated(existing, replayed=True)


def _initial_status(suppressed: bool, scheduled_for: datetime | None) -> str:
    if suppressed:
        return Status.SUPPRESSED
    return Status.SCHEDULED if scheduled_for is not None else Status.QUEUED


def message_create(
    *,
    client: ApiClient,
    recipient: str,
    template_version: TemplateVersion,
    context: dict,
    priority: Priority,
    idempotency_key: str | None = None,
    scheduled_for: datetime | None = None,
    cancel_key: str = "",
) -> MessageCreated:
    """Record one message; publish it now, or (scheduled_for) leave it SCHEDULED in the due set."""
    key = client_idempotency_key(client, idempotency_key)
    # What a retry must repeat; `scheduled_for` itself moves with the clock for a delayed send.
    request = {"recipient": recipient, "template_id": template_version.template_id,
               "context": context, "priority": int(priority),
               "scheduled": scheduled_for is not None, "cancel_key": cancel_key}
    if EmailMessage.objects.filter(idempotency_key=key).exists():
        return _replay(key, request)
    suppressed = email_is_suppressed(email=recipient)
    try:
        with transaction.atomic():
            message = EmailMessage.objects.create(
                client=client,
                recipient=recipient,
                template_version=template_version,
                context=context,
                priority=priority,
                idempotency_key=key,
                status=_initial_status(suppressed, scheduled_for),
                error="suppressed" if suppressed else "",
                scheduled_for=scheduled_for,
                cancel_key=cancel_key,
            )
            if message.status == Status.SCHEDULED:
                transaction.on_commit(lambda: _schedule_after_commit(message.id, scheduled_for))
            elif message.status == Status.QUEUED:
                transaction.on_commit(lambda: _enqueue_after_commit(message.id, priority))
    except IntegrityError:
        # A concurrent call with the same key won the insert.
        return _replay(key, request)
    return MessageCreated(message, replayed=False)
