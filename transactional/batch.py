"""Create a batch of transactional messages (POST /api/v1/messages/batch, issue 29).

The valid items of a batch are recorded by one statement, a multi-row INSERT over `unnest` of
one array per column (decision 105): `ON CONFLICT DO NOTHING RETURNING` (the days before: NOT
EXISTS, decision 122), the suppression check inside it per row, as the single send's statement
does (decision 52). Each item keeps its own idempotency key: a key that exists (from an earlier
call, or from an earlier item of this batch) is answered by one SELECT over all of them, as the
first message's replay or a conflict, exactly as a single send. After commit the new QUEUED ids
are published with one broker call per priority, and the SCHEDULED ones go to the due set in
one call. A batch of transactional mail only is the statement it always was; one with a
broadcast item also asks, for those items, whether the recipient left the service's broadcast
stream or the item's topic.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import connection, transaction
from django.utils import timezone

from audience.models import Stream, Topic
from audience.selectors import broadcast_withheld_sql, email_is_suppressed_sql
from clients.key_types import KeyType
from clients.models import Service
from core.partitions.routing import execute_routed, idempotency_floor
from core.priorities import Priority
from delivery.models import EmailMessage
from delivery.partitioning import MESSAGES, earlier_key_sql
from delivery.services.dispatch import messages_enqueue
from delivery.services.ledger.events import with_events
from scheduling.services.due import messages_schedule
from templates.models import TemplateVersion
from transactional.services import (
    ACCEPT_EVENT,
    client_idempotency_key,
    message_fingerprint,
    replay_fingerprint,
)

Status = EmailMessage.Status
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchItem:
    """One valid item, as the single send's message_create takes it."""

    recipient: str
    template_version: TemplateVersion
    context: dict
    priority: Priority
    idempotency_key: str | None = None
    scheduled_for: datetime | None = None
    cancel_key: str = ""
    stream: str = Stream.TRANSACTIONAL
    topic: Topic | None = None
    metadata: dict | None = None


@dataclass(frozen=True)
class BatchAccepted:
    id: int
    status: str
    scheduled_for: datetime | None
    replayed: bool


@dataclass(frozen=True)
class BatchKeyReused:
    """The item's idempotency key was first used for a different message (a 409 alone)."""


BatchOutcome = BatchAccepted | BatchKeyReused

# Per item, in this order: one array parameter each.
_PER_ROW = ("recipient", "context", "template_version", "priority", "idempotency_key",
            "scheduled_for", "cancel_key", "stream", "topic", "metadata", "status")
# The same for every item of a batch: one scalar parameter each.
_PER_BATCH = ("client", "created_at", "key_type")


def _suppressed_sql(broadcast: bool) -> tuple[str, str]:
    """(the SQL of whether the row `u` is withheld, the FROM items it reads), their parameters
    the batch's scope: whether it is a test key's, then (a batch with broadcast items) the
    service. A transactional batch asks the all-streams look only, as it always has; in a batch
    with broadcast items, a transactional item too."""
    address = "lower(u.recipient)"
    rows = "unnest({arrays}) WITH ORDINALITY AS u({names}, n)"
    if not broadcast:
        return email_is_suppressed_sql(address, "%s"), rows
    left = broadcast_withheld_sql(address, "k.sandbox", "k.service", "u.topic_id")
    return (f"({email_is_suppressed_sql(address, 'k.sandbox')} OR "
            f"(u.stream = '{Stream.BROADCAST.value}' AND {left}))",
            f"(SELECT %s::boolean AS sandbox, %s::varchar AS service) k, {rows}")


@cache
def _insert_statement(broadcast: bool) -> tuple[str, tuple[object, ...]]:
    """The INSERT (built once from the model, per kind of batch: with broadcast items or
    without) and the constant defaults it ends with."""
    meta = EmailMessage._meta
    given = {*_PER_ROW, *_PER_BATCH, "error"}
    defaulted = [field for field in meta.concrete_fields
                 if not field.primary_key and not field.null and field.name not in given]
    row_fields = [meta.get_field(name) for name in _PER_ROW]
    arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in row_fields)
    names = ", ".join(field.column for field in row_fields)
    suppressed, rows = _suppressed_sql(broadcast)
    columns = [*(meta.get_field(name).column for name in _PER_BATCH), *(f.column for f in row_fields),
               "error", *(field.column for field in defaulted)]
    values = ["%s"] * len(_PER_BATCH)
    values += [f"v.{field.column}" for field in row_fields if field.name != "status"]
    values += [f"CASE WHEN v.suppressed THEN '{Status.SUPPRESSED}' ELSE v.status END",
               "CASE WHEN v.suppressed THEN 'suppressed' ELSE '' END", *(["%s"] * len(defaulted))]
    insert = (f"INSERT INTO {meta.db_table} ({', '.join(columns)}) "
              f"SELECT {', '.join(values)} FROM ("
              f"SELECT u.*, {suppressed} AS suppressed "
              f"FROM {rows.format(arrays=arrays, names=names)}) v "
              f"WHERE NOT EXISTS ({earlier_key_sql('v.idempotency_key')}) ORDER BY v.n "
              "ON CONFLICT DO NOTHING")
    # The same statement writes each new row's accepted (or suppressed) event (decision 115).
    sql = with_events(insert, "id, status, idempotency_key", ACCEPT_EVENT, alias=meta.db_table)
    defaults = tuple(field.get_db_prep_save(field.get_default(), connection) for field in defaulted)
    return sql, defaults


def _insert(*, client: Service, items: Sequence[BatchItem], keys: list[str], key_type: str,
            ) -> dict[str, tuple[int, str]]:
    """Insert every item in one round trip: {idempotency key: (id, status)} of the new rows."""
    broadcast = any(item.stream == Stream.BROADCAST for item in items)
    sql, defaults = _insert_statement(broadcast)
    columns: list[list[object]] = [
        [item.recipient for item in items],
        [json.dumps(item.context) for item in items],
        [item.template_version.id for item in items],
        [int(item.priority) for item in items],
        keys,
        [item.scheduled_for for item in items],
        [item.cancel_key for item in items],
        [str(item.stream) for item in items],
        [item.topic.pk if item.topic else None for item in items],
        [json.dumps(item.metadata) if item.metadata else None for item in items],
        [Status.SCHEDULED if item.scheduled_for else Status.QUEUED for item in items],
    ]
    # In the statement's order: the batch's constants, the defaults, its scope, the arrays.
    scope = [key_type == KeyType.TEST, *([client.pk] if broadcast else [])]
    params = [client.pk, timezone.now(), key_type, *defaults, *scope, *columns,
              idempotency_floor(MESSAGES.table)]
    with connection.cursor() as cursor:
        execute_routed(cursor, sql, params)
        return {key: (message_id, status) for message_id, status, key in cursor.fetchall()}


def _replays(*, items: Sequence[BatchItem], keys: list[str], key_type: str,
             created: dict[str, tuple[int, str]]) -> dict[int, BatchOutcome]:
    """The outcome of each item whose key already had a message, by item index: that message
    when the item asks for the same one (as message_create's replay compares), else a conflict."""
    # A key repeated within the batch: its first item made the row, the later ones replay it.
    first_use = {key: index for index, key in reversed(list(enumerate(keys)))}
    waiting = {index: key for index, key in enumerate(keys)
               if key not in created or first_use[key] != index}
    if not waiting:
        return {}
    existing = {row.idempotency_key: row for row in EmailMessage.objects
                .filter(idempotency_key__in=set(waiting.values()),
                        id__gte=idempotency_floor(MESSAGES.table))
                .select_related("template_version")
                .only("id", "status", "idempotency_key", "recipient", "context", "priority",
                      "scheduled_for", "cancel_key", "key_type", "stream", "topic_id", "metadata",
                      "template_version__template_id")}
    outcomes: dict[int, BatchOutcome] = {}
    for index, key in waiting.items():
        item, row = items[index], existing.get(key)
        same = row is not None and message_fingerprint(row) == replay_fingerprint(
            recipient=item.recipient, template_id=item.template_version.template_id,
            context=item.context, priority=item.priority, scheduled_for=item.scheduled_for,
            cancel_key=item.cancel_key, key_type=key_type, stream=item.stream,
            topic_id=item.topic.pk if item.topic else None, metadata=item.metadata)
        # A row gone between the INSERT and this SELECT (purged) cannot be replayed: a conflict.
        outcomes[index] = (BatchAccepted(row.id, row.status, row.scheduled_for, replayed=True)
                           if same else BatchKeyReused())
    return outcomes


def _publish_after_commit(by_priority: dict[Priority, list[int]],
                          due: list[tuple[int, datetime]]) -> None:
    """One publish per priority, one due-set call; the rows are durable, so a broker or Redis
    outage is made good by the recovery loop and the scheduler's overdue sweep."""
    for priority, ids in by_priority.items():
        try:
            messages_enqueue(message_ids=ids, priority=priority)
        except Exception:
            logger.exception("could not publish %d messages; recovery will retry", len(ids))
    if due:
        try:
            messages_schedule(items=due)
        except Exception:
            logger.exception("could not add %d messages to the due set; the sweep will", len(due))


def messages_create_batch(*, client: Service, items: Sequence[BatchItem],
                          key_type: str = KeyType.LIVE) -> list[BatchOutcome]:
    """Record every item (one INSERT) and publish the new ones (one call per priority); the
    outcomes in item order. `key_type` as message_create's: the caller's key's."""
    if not items:
        return []
    keys = [client_idempotency_key(client, item.idempotency_key) for item in items]
    created = _insert(client=client, items=items, keys=keys, key_type=key_type)
    replays = _replays(items=items, keys=keys, key_type=key_type, created=created)
    outcomes: list[BatchOutcome] = []
    by_priority: dict[Priority, list[int]] = defaultdict(list)
    due: list[tuple[int, datetime]] = []
    for index, (item, key) in enumerate(zip(items, keys, strict=True)):
        if index in replays:
            outcomes.append(replays[index])
            continue
        message_id, status = created[key]
        if status == Status.QUEUED:
            by_priority[item.priority].append(message_id)
        elif status == Status.SCHEDULED:
            due.append((message_id, item.scheduled_for))
        outcomes.append(BatchAccepted(message_id, status, item.scheduled_for
                                      if status == Status.SCHEDULED else None, replayed=False))
    # Outside a transaction this runs at once (the rows are committed); inside one, after it.
    transaction.on_commit(lambda: _publish_after_commit(dict(by_priority), due))
    return outcomes
