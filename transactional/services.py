"""Create transactional messages (the POST /api/v1/messages path).

The unique idempotency key makes the insert itself the duplicate check: a repeated call with the
same key returns the first message and enqueues nothing. A suppressed recipient is recorded as
SUPPRESSED and never enqueued. The task is published only after the row commits, so a worker can
never look for a row that is not there yet.

The insert is one statement (decision 52): `INSERT .. ON CONFLICT DO NOTHING
RETURNING`, with the suppression check inside it (a CASE on EXISTS), so a request without a key
costs one round trip and no lookup, and a request whose key exists costs one more (the replay).
A message is of the transactional stream (stopped only by an all-streams suppression: that
statement is unchanged) or the broadcast stream (issue 28): its statement also asks, once, in
a one-row CTE, whether the recipient left the service's broadcast stream or the message's topic.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import connection, transaction
from django.utils import timezone
from rest_framework import exceptions, status

from audience.models import Stream, Topic
from audience.selectors import broadcast_withheld_sql, email_is_suppressed_sql
from clients.key_types import KeyType
from clients.models import Service
from core.partitions.routing import execute_routed, idempotency_floor
from core.priorities import Priority
from delivery.models import EmailMessage
from delivery.partitioning import MESSAGES, earlier_key_sql
from delivery.services.dispatch import messages_enqueue
from delivery.services.ledger.events import status_event_sql, with_events
from eventlog.types import EventType
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


def client_idempotency_key(client: Service, key: str | None) -> str:
    """Callers' keys are scoped to the caller; without one every call is new."""
    return f"client:{client.pk}:{key}" if key else f"auto:{uuid.uuid4().hex}"


class IdempotencyKeyReusedError(exceptions.APIException):
    """The key was first used for a different message: a 409, as for the `Idempotency-Key`
    header (clients/idempotency.py); replaying the first would silently drop this one."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "This idempotency_key was used with a different request."


def replay_fingerprint(*, recipient: str, template_id: int, context: dict, priority: int,
                       scheduled_for: datetime | None, cancel_key: str, key_type: str,
                       stream: str, topic_id: int | None, metadata: dict | None = None) -> tuple:
    """What a retry under the same idempotency key must repeat to be answered with the first
    message; `scheduled_for` itself moves with the clock for a delayed send, so only whether
    there is one. The stream and topic too: a newsletter retried as an OTP (or for another
    topic) is another message, which the first one's consent answer does not cover. The
    metadata too: the first message's references would answer for the retry's."""
    return (recipient, template_id, context, int(priority), scheduled_for is not None,
            cancel_key, key_type, str(stream), topic_id, metadata or None)


def message_fingerprint(message: EmailMessage) -> tuple:
    """replay_fingerprint of a stored message (its template_version selected with it)."""
    return replay_fingerprint(
        recipient=message.recipient, template_id=message.template_version.template_id,
        context=message.context, priority=message.priority, scheduled_for=message.scheduled_for,
        cancel_key=message.cancel_key, key_type=message.key_type, stream=message.stream,
        topic_id=message.topic_id, metadata=message.metadata)


def _replay(key: str, fingerprint: tuple) -> MessageCreated:
    """The message first created under `key`, if the request's fingerprint is its own."""
    existing = EmailMessage.objects.select_related("template_version").get(
        idempotency_key=key, id__gte=idempotency_floor(MESSAGES.table))
    if message_fingerprint(existing) != fingerprint:
        raise IdempotencyKeyReusedError
    return MessageCreated(existing, replayed=True)


# The columns a create sets; every other NOT NULL column takes its model default.
_GIVEN = ("client", "recipient", "context", "template_version", "priority", "idempotency_key",
          "scheduled_for", "cancel_key", "created_at", "key_type", "stream", "topic", "metadata")
# The broadcast statement's one-row CTE: the send's address, scope, service and topic, named
# once however often the consent check reads them.
_BROADCAST_CTE = (
    "send AS (SELECT %s::varchar AS email, %s::boolean AS sandbox, %s::varchar AS service, "
    "%s::bigint AS topic), withheld AS (SELECT "
    f"({email_is_suppressed_sql('send.email', 'send.sandbox')} OR "
    f"{broadcast_withheld_sql('send.email', 'send.sandbox', 'send.service', 'send.topic')}) AS yes "
    "FROM send), "
)
# The event each new row records (decision 115): accepted, or suppressed at accept.
ACCEPT_EVENT = status_event_sql("changed.ev_status", {
    Status.QUEUED: EventType.ACCEPTED, Status.SCHEDULED: EventType.ACCEPTED,
    Status.SUPPRESSED: EventType.SUPPRESSED})


@cache
def _insert_statement(stream: str) -> tuple[str, tuple[object, ...]]:
    """The INSERT of a message of `stream` (built once from the model) and the constant defaults
    it ends with. A transactional one asks the all-streams suppressions only, as it always has
    (two parameters per look: the address, and whether it is a test key's send); a broadcast one
    also whether the recipient left the service's broadcast stream or the topic, decided once
    in its CTE (four parameters, before the row's)."""
    meta = EmailMessage._meta
    defaulted = [field for field in meta.concrete_fields if not field.primary_key and not field.null
                 and field.name not in {*_GIVEN, "status", "error"}]
    columns = [meta.get_field(name).column for name in _GIVEN]
    columns += ["status", "error", *(field.column for field in defaulted)]
    broadcast = stream == Stream.BROADCAST
    suppressed = "(SELECT yes FROM withheld)" if broadcast else email_is_suppressed_sql("%s", "%s")
    placeholders = ["%s"] * len(_GIVEN)
    placeholders[_GIVEN.index("context")] = "%s::jsonb"
    placeholders[_GIVEN.index("metadata")] = "%s::jsonb"
    placeholders += [f"CASE WHEN {suppressed} THEN %s ELSE %s END",
                     f"CASE WHEN {suppressed} THEN %s ELSE '' END", *(["%s"] * len(defaulted))]
    # The key is unique within its day's partition (ON CONFLICT); NOT EXISTS looks in the days
    # since the idempotency floor (decision 122).
    insert = (f"INSERT INTO {meta.db_table} ({', '.join(columns)}) SELECT {', '.join(placeholders)} "
              f"WHERE NOT EXISTS ({earlier_key_sql('%s')}) ON CONFLICT DO NOTHING")
    # The same statement writes the accepted (or suppressed) event, for a service recording it.
    sql = with_events(insert, "id, status, error", ACCEPT_EVENT, alias=meta.db_table,
                      prefix=_BROADCAST_CTE if broadcast else "")
    defaults = tuple(field.get_db_prep_save(field.get_default(), connection) for field in defaulted)
    return sql, defaults


def _insert(message: EmailMessage) -> bool:
    """Insert `message` (SUPPRESSED instead of its status when the recipient is suppressed, or
    for broadcast mail left the stream or topic); False when its idempotency key already exists.
    Sets its id, status and error."""
    sql, defaults = _insert_statement(message.stream)
    email = message.recipient.lower()
    is_test = message.key_type == KeyType.TEST
    params = [message.client_id, message.recipient, json.dumps(message.context),
              message.template_version_id, int(message.priority), message.idempotency_key,
              message.scheduled_for, message.cancel_key, message.created_at, message.key_type,
              message.stream, message.topic_id,
              None if message.metadata is None else json.dumps(message.metadata)]
    if message.stream == Stream.BROADCAST:
        params = [email, is_test, message.client_id, message.topic_id, *params]
        look: list[object] = []
    else:
        look = [email, is_test]
    params += [*look, Status.SUPPRESSED, message.status, *look, "suppressed", *defaults,
               message.idempotency_key, idempotency_floor(MESSAGES.table)]
    with connection.cursor() as cursor:
        execute_routed(cursor, sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    message.id, message.status, message.error = row
    message._state.adding = False
    return True


def message_create(
    *,
    client: Service,
    recipient: str,
    template_version: TemplateVersion,
    context: dict,
    priority: Priority,
    idempotency_key: str | None = None,
    scheduled_for: datetime | None = None,
    cancel_key: str = "",
    key_type: str = KeyType.LIVE,
    stream: str = Stream.TRANSACTIONAL,
    topic: Topic | None = None,
    metadata: dict | None = None,
) -> MessageCreated:
    """Record one message; publish it now, or (scheduled_for) leave it SCHEDULED in the due set.
    `key_type`: the caller's key's (a test key's message is settled by the sandbox, issue 27);
    a replay under another key type is a 409, never the other type's message. `stream` and
    `topic` (broadcast only; the caller's own, audience.topics.topic_for_send): what may stop
    it, at accept and again at send (decision 106). `metadata`: the caller's own references,
    validated (core/api/metadata.py); None or {} stores NULL."""
    if topic is not None and stream != Stream.BROADCAST:
        raise ValueError("only broadcast mail has a topic")
    key = client_idempotency_key(client, idempotency_key)
    message = EmailMessage(
        client=client, recipient=recipient, template_version=template_version, context=context,
        priority=priority, idempotency_key=key, cancel_key=cancel_key, scheduled_for=scheduled_for,
        status=Status.SCHEDULED if scheduled_for is not None else Status.QUEUED,
        created_at=timezone.now(), key_type=key_type, stream=stream, topic=topic,
        metadata=metadata or None,
    )
    if not _insert(message):
        return _replay(key, replay_fingerprint(
            recipient=recipient, template_id=template_version.template_id, context=context,
            priority=priority, scheduled_for=scheduled_for, cancel_key=cancel_key,
            key_type=key_type, stream=stream, topic_id=topic.pk if topic else None,
            metadata=metadata))
    # Outside a transaction these run at once (the row is committed); inside one, after it commits.
    if message.status == Status.SCHEDULED:
        transaction.on_commit(lambda: _schedule_after_commit(message.id, scheduled_for))
    elif message.status == Status.QUEUED:
        transaction.on_commit(lambda: _enqueue_after_commit(message.id, priority))
    return MessageCreated(message, replayed=False)
