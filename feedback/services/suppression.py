"""Automatic suppression: hard bounces and complaints (every stream), unsubscribes (the service's
broadcast stream, decision 106); soft bounces by threshold.

Also drops whose reason is the ESP's own bounce, unsubscribe or spam-report list: the ESP will
not mail that address again, so neither do we (it would fail over to another provider).
An event about one of our messages acts on that message's recipient, whatever address the event
names: a different one is logged, never suppressed (decision 48). Once the message's personal
data is removed, the event's address is acted on if its keyed hash is the message's (120).
A test key's message (issue 27) suppresses in the test key's own scope (`Suppression.sandbox`),
which stops test sends only, and never counts towards the soft-bounce tally that suppresses for
everyone.
Addresses are lower-cased (the send path compares lower-cased addresses). Inserts ignore an
address already suppressed, so repeats and concurrent batches are harmless. The send path
re-checks suppressions per batch, so a committed suppression stops further sends mid-campaign.
"""

from __future__ import annotations

import hmac
import logging
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from audience.models import ConsentChange, Suppression
from audience.services.consent import ConsentSubject, broadcast_unsubscribe
from clients.key_types import KeyType
from core.personal_data import recipient_hash
from feedback.models import SoftBounceTally
from feedback.normalize import EventType
from feedback.services.events import LINK_PROVIDER, StoredEvent

logger = logging.getLogger(__name__)
Reason = Suppression.Reason
Source = ConsentChange.Source
TALLY_TABLE = SoftBounceTally._meta.db_table
_DROP_REASONS = {
    "bounce": Reason.HARD_BOUNCE, "unsubscribe": Reason.UNSUBSCRIBE, "complaint": Reason.COMPLAINT,
}


def suppression_reason(stored: StoredEvent) -> str | None:
    event = stored.event
    if event.event_type is EventType.BOUNCED and event.bounce_type == "hard":
        return Reason.HARD_BOUNCE
    if event.event_type is EventType.COMPLAINED:
        return Reason.COMPLAINT
    if event.event_type is EventType.UNSUBSCRIBED:
        return Reason.UNSUBSCRIBE
    if event.event_type is EventType.DROPPED and event.drop_reason:
        return _DROP_REASONS[event.drop_reason]
    return None


def suppressions_from_events(*, events: Iterable[StoredEvent]) -> int:
    """Suppress the recipient of every new hard bounce, complaint, unsubscribe or listed drop."""
    found: dict[str, tuple[str, str]] = {}
    caused_by: dict[str, str | None] = {}
    sandboxed: dict[str, tuple[str, str]] = {}  # a test key's: its own scope
    soft: Counter[str] = Counter()
    for stored in events:
        address = _address(stored)
        if not address or stored.event.provider == LINK_PROVIDER:
            continue  # a link's unsubscribe was consent's to apply, to its topic or stream
        reason = suppression_reason(stored)
        is_test = stored.message is not None and stored.message.key_type == KeyType.TEST
        if reason == Reason.UNSUBSCRIBE:
            _broadcast_unsubscribe(stored, address, is_test)
        elif reason:
            event = stored.event
            source = f"{event.provider}:{event.event_type.value}:{event.provider_event_id}"
            (sandboxed if is_test else found).setdefault(address, (reason, source[:100]))
            caused_by.setdefault(address, stored.message.client_id if stored.message else None)
        elif stored.event.event_type is EventType.BOUNCED and not is_test:
            soft[address] += 1
    for address in soft_bounces_count(counts=soft):
        found.setdefault(address, (Reason.HARD_BOUNCE, "soft-bounce-threshold"))
    return (suppressions_add(entries=found, caused_by=caused_by)
            + suppressions_add(entries=sandboxed, caused_by=caused_by, sandbox=True))


def _broadcast_unsubscribe(stored: StoredEvent, address: str, is_test: bool) -> None:
    """An ESP's unsubscribe (its own link, or its list) leaves the broadcast stream of the service
    whose message it was about, never its transactional mail (decision 106). One about a message
    we do not know names no service: logged, and nothing is stopped."""
    message = stored.message
    if message is None or not message.client_id:
        logger.warning("unsubscribe from %s for %s names no message of ours: ignored",
                       stored.event.provider, address)
        return
    event = stored.event
    broadcast_unsubscribe(
        subject=ConsentSubject.of(message.client_id, address), sandbox=is_test, source=Source.ESP_EVENT,
        detail=f"{event.provider}:{event.event_type.value}:{event.provider_event_id}",
        campaign_id=message.campaign_id,
    )


def suppressions_add(
    *, entries: dict[str, tuple[str, str]], caused_by: dict[str, str | None], sandbox: bool = False
) -> int:
    """{address: (reason, source)} -> Suppression rows (existing ones are left as they are);
    `caused_by` names the client whose message the event was about, who may list the row;
    `sandbox`: rows of the test keys' scope."""
    if not entries:
        return 0
    rows = [Suppression(email=a, reason=r, source=s, client_id=caused_by.get(a), sandbox=sandbox)
            for a, (r, s) in sorted(entries.items())]
    Suppression.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def soft_bounces_count(*, counts: Counter[str]) -> list[str]:
    """Add soft bounces per address; return the addresses that reached the threshold."""
    if not counts:
        return []
    now: datetime = timezone.now()
    params: list[object] = []
    for address in sorted(counts):
        params += [address, counts[address], now]
    sql = (
        f"INSERT INTO {TALLY_TABLE} (email, count, last_at) VALUES "
        f"{', '.join(['(%s, %s, %s)'] * len(counts))} ON CONFLICT (email) DO UPDATE SET "
        f"count = {TALLY_TABLE}.count + EXCLUDED.count, last_at = EXCLUDED.last_at "
        f"RETURNING email, count"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [email for email, count in rows if count >= settings.FEEDBACK_SOFT_BOUNCE_THRESHOLD]


def _address(stored: StoredEvent) -> str:
    """The address to act on: our message's recipient when the event is about one of ours; for
    a message whose personal data was removed, the event's own address if it hashes to the one
    the message had (decision 120), else none."""
    named = _normalized(stored.event.recipient)
    if stored.message is None:
        return named
    if stored.message.personal_data_removed:
        if named and hmac.compare_digest(recipient_hash(named), stored.message.recipient_hash):
            return named
        event = stored.event
        logger.warning(
            "%s %s event %s about message %d (personal data removed) names %s, not the address "
            "the message had: nothing suppressed", event.provider, event.event_type.value,
            event.provider_event_id, stored.message.id, "another address" if named else "no address")
        return ""
    ours = _normalized(stored.message.recipient)
    if named and named != ours:
        event = stored.event
        logger.warning(
            "%s %s event %s names %s but message %d was sent to %s: acting on the message's recipient",
            event.provider, event.event_type.value, event.provider_event_id, named, stored.message.id, ours,
        )
    return ours


def _normalized(address: str) -> str:
    return address.strip().lower()[:254]
