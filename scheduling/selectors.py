"""Reads for scheduling: recipients' timezones and their best open hour."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, time, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count

from audience.models import Contact
from clients.key_types import KeyType
from core.priorities import Priority
from delivery.models import EmailMessage
from delivery.selectors import messages_visible, queue_backlogs
from feedback.models import EmailEvent
from scheduling import timing

OPEN_HISTORY_DAYS = 90
SCHEDULED_MESSAGES_SHOWN = 100
EVENTS = EmailEvent._meta.db_table


def recipient_timezone(*, client_id: str, email: str, requested: str | None = None) -> str:
    """The request's timezone, else the client's contact's, else the configured default; a
    TimingError on `timezone` when none is available (or the one found is unknown)."""
    contacts = Contact.objects.filter(client_id=client_id, email=email.lower())
    name = requested or (
        contacts.values_list("timezone", flat=True).first() or ""
    ) or settings.NOTIFIER_DEFAULT_TIMEZONE
    if not name:
        raise timing.TimingError(
            "timezone", "No timezone: give schedule.timezone, set the contact's timezone, "
            "or configure NOTIFIER_DEFAULT_TIMEZONE."
        )
    timing.zone(name)
    return name


def best_open_hour_sql(audience: str) -> str:
    """SQL for (email, hour): each recipient's most frequent local open hour in the window.

    `audience` is a relation with columns (email, timezone) whose timezones are valid IANA
    names (validate them with timing.zone first); params: [window start, window end]. One
    aggregate for the whole audience; `mode()` breaks ties towards the earliest hour.
    """
    return (
        "SELECT a.email, mode() WITHIN GROUP "
        "(ORDER BY EXTRACT(HOUR FROM e.occurred_at AT TIME ZONE a.timezone)::int) AS hour "
        f"FROM {EVENTS} e JOIN {audience} ON a.email = lower(e.recipient) "
        "WHERE e.event_type = 'opened' AND e.occurred_at >= %s AND e.occurred_at < %s "
        "GROUP BY a.email"
    )


def best_open_hours(*, recipients: dict[str, str], now: datetime) -> dict[str, int]:
    """email -> local hour (0-23) of most opens over the last 90 days, for those with history."""
    if not recipients:
        return {}
    for name in set(recipients.values()):
        timing.zone(name)
    emails = [email.lower() for email in recipients]
    audience = "unnest(%s::text[], %s::text[]) AS a(email, timezone)"
    params = [emails, list(recipients.values()), now - timedelta(days=OPEN_HISTORY_DAYS), now]
    with connection.cursor() as cursor:
        cursor.execute(best_open_hour_sql(audience), params)
        return dict(cursor.fetchall())


def optimal_due(*, recipients: dict[str, str], now: datetime) -> dict[str, datetime]:
    """email -> next UTC instant of that recipient's best open hour (fallback: the configured
    hour, 10:00 local), computed once per distinct (timezone, hour)."""
    hours = best_open_hours(recipients=recipients, now=now)
    fallback = settings.NOTIFIER_OPTIMAL_FALLBACK_HOUR
    cache: dict[tuple[str, int], datetime] = {}
    result = {}
    for email, tz_name in recipients.items():
        key = (tz_name, hours.get(email.lower(), fallback))
        if key not in cache:
            cache[key] = timing.next_occurrence(time(key[1]), timing.zone(tz_name), now=now)
        result[email] = cache[key]
    return result


def pending_counts(*, campaign_ids: list[int]) -> dict[int, int]:
    """campaign id -> messages still waiting for their time (SCHEDULED)."""
    rows = (EmailMessage.objects.filter(campaign_id__in=campaign_ids, status=EmailMessage.Status.SCHEDULED)
            .values("campaign_id").annotate(n=Count("id")))
    return {row["campaign_id"]: row["n"] for row in rows}


def scheduled_messages(
    *, client: object, key_type: str = KeyType.LIVE, limit: int = SCHEDULED_MESSAGES_SHOWN
) -> dict:
    """The client's one-off messages still waiting for their time (delayed, scheduled,
    local_time, optimal), soonest first, with how many there are in all; those a key of type
    `key_type` may see (delivery.selectors.messages_visible)."""
    waiting = messages_visible(EmailMessage.objects.filter(
        client=client, status=EmailMessage.Status.SCHEDULED, campaign__isnull=True), key_type=key_type)
    rows = waiting.order_by("scheduled_for", "id").values(
        "id", "recipient", "scheduled_for", "cancel_key", "priority")[:limit]
    return {"count": waiting.count(), "messages": [
        {"id": r["id"], "to": r["recipient"], "scheduled_for": r["scheduled_for"],
         "cancel_key": r["cancel_key"], "priority": Priority(r["priority"]).label} for r in rows
    ]}


def queue_snapshot(*, now: datetime) -> dict[str, dict[str, float | int | None]]:
    """Per priority: pending (QUEUED, waiting for a worker), processing (SENDING) and the age of
    the oldest pending message, as the dashboard shows them (delivery.selectors.queue_backlogs)."""
    return {priority.label: asdict(backlog) for priority, backlog in queue_backlogs(now=now).items()}
