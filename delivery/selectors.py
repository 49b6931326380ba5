"""Reads of delivery state for the API, the dashboard and the admin (no writes here)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

import redis
from django.db import connection
from django.db.models import QuerySet
from django.db.models.functions import Lower

from clients.key_types import KeyType, on_callers_side
from core.priorities import Priority
from core.redis_client import get_redis
from delivery.models import AmbiguityRecord, DeadLetter, EmailMessage
from delivery.providers import provider_order
from delivery.services.ambiguity import next_step, resend_policies
from delivery.services.circuit_breaker import events_key, state_key
from delivery.services.provider_faults import fault_key

MESSAGE_TABLE = EmailMessage._meta.db_table


@dataclass(frozen=True)
class BreakerState:
    provider: str
    state: str  # closed | open | half_open | unknown (Redis unreachable)
    open_for_seconds: float
    recent_failures: int
    transitions: list[str]  # newest first: "<epoch ms> closed -> open (5 failures in 10000 ms)"
    # The same permanent error for everyone (delivery/services/provider_faults.py): its
    # signature while it lasts, "" otherwise. The dashboard's alert turns critical on it.
    fault: str = ""


def circuit_breakers_list() -> list[BreakerState]:
    """One entry per configured provider, in failover order."""
    return [circuit_breaker_get(name) for name in provider_order()]


def circuit_breaker_get(name: str) -> BreakerState:
    """One provider's breaker, read from Redis; state 'unknown' when Redis is unreachable."""
    try:
        client = get_redis()
        raw = {k.decode(): v.decode() for k, v in client.hgetall(state_key(name)).items()}
        events = [line.decode() for line in client.lrange(events_key(name), 0, 19)]
        fault = (client.hget(fault_key(name), "sig") or b"").decode()
    except redis.RedisError:
        return BreakerState(name, "unknown", 0.0, 0, [])
    state = raw.get("state", "closed")
    until_ms = float(raw.get("until") or 0)
    remaining = max(0.0, until_ms / 1000 - time.time()) if state == "open" else 0.0
    return BreakerState(name, state, round(remaining, 3), int(raw.get("failures") or 0), events, fault)


def messages_visible(
    messages: QuerySet[EmailMessage], *, key_type: str, asked: str | None = None
) -> QuerySet[EmailMessage]:
    """The messages a key of type `key_type` may read (issue 27): a test key its test messages
    only; a live or team key the live and team ones, or the test ones when it asks for them
    (`asked`, e.g. `?key_type=test`)."""
    return on_callers_side(messages, KeyType.TEST if asked == KeyType.TEST else key_type)


def dead_letters_pending(*, since: datetime | None = None) -> QuerySet[DeadLetter]:
    """Dead letters not yet requeued, oldest first."""
    rows = DeadLetter.objects.filter(requeued_at__isnull=True).order_by("id")
    return rows.filter(created_at__gte=since) if since else rows


@dataclass(frozen=True)
class QueueBacklog:
    pending: int  # QUEUED: waiting for a worker
    processing: int  # SENDING: claimed by a worker
    oldest_age_seconds: float | None  # the longest a pending message has waited; None: none waits


# A message waits from the moment it may be sent: its creation, or its due time if it was
# scheduled. Not `requeued_at`: recovery re-stamps it on every re-publish of a stuck row, which
# made a message lost for minutes look seconds old; not `created_at` alone: a send scheduled a
# day ahead looked a day late the moment it fell due.
_BACKLOG_SQL = f"""
SELECT priority, count(*) FILTER (WHERE status = 'QUEUED'), count(*) FILTER (WHERE status = 'SENDING'),
       min(CASE WHEN scheduled_for > created_at THEN scheduled_for ELSE created_at END)
         FILTER (WHERE status = 'QUEUED')
FROM {MESSAGE_TABLE} WHERE status IN ('QUEUED', 'SENDING') GROUP BY priority
"""


def queue_backlogs(*, now: datetime) -> dict[Priority, QueueBacklog]:
    """Per priority, in one GROUP BY: the one definition the dashboard, the overview API,
    /metrics and the schedules API share."""
    with connection.cursor() as cursor:
        cursor.execute(_BACKLOG_SQL)
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    backlogs = {}
    for priority in Priority:
        pending, processing, oldest = rows.get(int(priority), (0, 0, None))
        age = round(max(0.0, (now - oldest).total_seconds()), 3) if oldest else None
        backlogs[priority] = QueueBacklog(pending, processing, age)
    return backlogs


# Age buckets of the rows still AMBIGUOUS (upper bounds in seconds), for the dashboard and API.
AMBIGUOUS_AGES = ((300, "under 5 min"), (3600, "5-60 min"), (86400, "1-24 h"), (None, "over 24 h"))
AMBIGUOUS_LISTED = 50


def ambiguous_summary(messages: QuerySet[EmailMessage], *, now: datetime) -> dict:
    """The AMBIGUOUS rows of `messages` (already scoped to a client, or all) by reason, provider
    and age, with what will happen to each (delivery/services/ambiguity.py), oldest first."""
    rows = list(messages.filter(status=EmailMessage.Status.AMBIGUOUS).order_by("send_started_at")
                .values_list("id", "recipient", "provider", "send_started_at")[:10_000])
    reasons = _held_reasons([pk for pk, *_ in rows])
    policies = resend_policies({provider for _, _, provider, _ in rows if provider}, now)
    groups: dict[tuple[str, str], dict] = {}
    ages = dict.fromkeys((label for _, label in AMBIGUOUS_AGES), 0)
    listed = []
    for pk, recipient, provider, started in rows:
        age = (now - started).total_seconds() if started else 0.0
        reason = reasons.get(pk, "unrecorded")
        group = groups.setdefault((reason, provider), {
            "reason": reason, "provider": provider, "count": 0, "oldest_seconds": round(age),
            "next_step": next_step(provider, policies.get(provider))})
        group["count"] += 1
        ages[next(label for bound, label in AMBIGUOUS_AGES if bound is None or age < bound)] += 1
        if len(listed) < AMBIGUOUS_LISTED:
            listed.append({"id": pk, "recipient": recipient, "provider": provider, "reason": reason,
                           "age_seconds": round(age)})
    return {"total": len(rows), "by_reason": list(groups.values()),
            "by_age": [{"age": label, "count": n} for label, n in ages.items()], "oldest": listed}


def _held_reasons(message_ids: list[int]) -> dict[int, str]:
    """Each message's latest reason for being held (the ambiguity log)."""
    records = (AmbiguityRecord.objects.filter(message_id__in=message_ids, kind=AmbiguityRecord.Kind.HELD)
               .order_by("message_id", "-id").distinct("message_id").values_list("message_id", "reason"))
    return dict(records)


def scheduled_messages_pending_until(service_id: str, stream: str) -> datetime | None:
    """The latest due time of the service's one-off messages of `stream` still SCHEDULED (a
    campaign's are its own: campaigns registers them). One backward probe of
    msg_client_scheduled_idx; what personal-data retention may not be shorter than."""
    return (EmailMessage.objects
            .filter(client_id=service_id, status=EmailMessage.Status.SCHEDULED, campaign__isnull=True,
                    stream=stream, scheduled_for__isnull=False)
            .order_by("-scheduled_for").values_list("scheduled_for", flat=True).first())



def campaign_message_sent_to(*, campaign_id: int, contact_id: int | None = None, service_id: str = "",
                             recipient: str = "") -> int | None:
    """The id of the campaign's latest sent message to a contact (or, for a campaign with no
    contacts, the service's address `recipient`, in any case): the mail whose unsubscribe link
    was used. None when nothing was sent to them, or the address is gone with its personal
    data. Found through msg_contact_idx or msg_client_recipient_idx: a few rows, not the
    campaign's."""
    rows = EmailMessage.objects.filter(campaign_id=campaign_id, sent_at__isnull=False)
    if contact_id is not None:
        rows = rows.filter(contact_id=contact_id)
    elif recipient:
        rows = (rows.alias(address=Lower("recipient"))
                .filter(client_id=service_id, contact__isnull=True, address=recipient.lower()))
    else:
        return None
    return rows.order_by("-sent_at", "-id").values_list("id", flat=True).first()
