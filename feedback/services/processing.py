"""Process normalised events: store, mark, move statuses, count, suppress (one transaction).

Everything a batch changes commits together, so a crash or a lost race leaves no half-counted
batch: the retry finds its events already stored (ON CONFLICT DO NOTHING) and does nothing
twice. Locks are taken in one order (events, marks, messages, suppressions, the campaigns'
counts locks (shared), counters, the minute tally, each sorted) so concurrent batches do not
deadlock each other.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction

from clients.key_types import KeyType
from core import live_counts
from core.live_counts import UNKNOWN_MESSAGE, live_counts_add
from delivery.models import EmailMessage
from delivery.services import ledger
from delivery.services.ambiguity import provider_events_seen
from delivery.services.sandbox import SANDBOX_PROVIDER
from eventlog.types import EventType as ServiceEventType
from feedback.normalize import NormalizedEvent
from feedback.services.counters import campaign_counters_increment
from feedback.services.events import LINK_PROVIDER, StoredEvent, events_store
from feedback.services.marks import marks_from_events, marks_record
from feedback.services.reputation import reputation_check
from feedback.services.statuses import ambiguous_messages_reconcile, message_statuses_apply
from feedback.services.suppression import suppressions_from_events
from feedback.services.tally import campaign_counts_share, campaign_tally_increment, campaign_tally_of_batch

logger = logging.getLogger(__name__)
# The service's event of each first-occurrence mark (feedback.services.marks); a soft bounce
# and an unsubscribe have none here (the latter is consent's recipient.unsubscribed).
_MARK_EVENTS = {
    "delivered": ServiceEventType.DELIVERED, "opened": ServiceEventType.OPENED,
    "clicked": ServiceEventType.CLICKED, "bounced": ServiceEventType.BOUNCED,
    "complained": ServiceEventType.COMPLAINED, "dropped": ServiceEventType.FAILED,
}


@dataclass
class ProcessReport:
    total: int = 0
    new: int = 0
    unknown: int = 0
    new_marks: int = 0
    suppressed: int = 0
    still_sending: list[int] = field(default_factory=list)
    stored: list[StoredEvent] = field(default_factory=list, repr=False)
    campaigns: set[int] = field(default_factory=set)
    clients: set[str] = field(default_factory=set)


def events_process(*, events: Sequence[NormalizedEvent], check_reputation: bool = True,
                   relax_commit: bool = True) -> ProcessReport:
    """Apply a batch of normalised events; safe to call again with the same events.

    A caller that wraps this in its own transaction passes `check_reputation=False` and calls
    `reputation_check` after its commit, so the guard's counting queries hold no row locks, and
    `relax_commit=False` when its own writes must not be lost in a crash (see `_relax_commit`).
    """
    report = ProcessReport(total=len(events))
    with transaction.atomic():
        if relax_commit:
            _relax_commit()
        stored = events_store(events)
        _apply(stored, report)
        live_counts_add(live_counts.EVENTS, _live_event_counts(stored))
    if check_reputation and (report.campaigns or report.clients):
        reputation_check(campaign_ids=report.campaigns, client_ids=report.clients)
    return report


def _live_event_counts(stored: list[StoredEvent]) -> dict[str, int]:
    """The dashboard's live count of the events stored (core/live_counts.py): per type, and
    those of unknown messages; the sandbox's simulated events are not counted."""
    counts: dict[str, int] = {}
    for item in stored:
        if item.event.provider == SANDBOX_PROVIDER:
            continue
        for name in (item.event.event_type.value, *([UNKNOWN_MESSAGE] if item.message is None else [])):
            counts[name] = counts.get(name, 0) + 1
    return counts


def _relax_commit() -> None:
    """Do not wait for the WAL flush at commit (PostgreSQL `synchronous_commit = off`).

    Safe here: the raw request is already durable (stored with a normal commit), and this
    transaction also marks its delivery processed, so a crash that loses the last commits
    loses them whole: the delivery is pending again and is reprocessed idempotently.
    """
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _events_reach(known: list[StoredEvent]) -> dict[str, datetime]:
    """Per provider, the latest hand-off of a message this batch has an event about: the
    evidence that settles AMBIGUOUS sends of that provider (delivery/services/ambiguity.py)."""
    reach: dict[str, datetime] = {}
    for stored in known:
        started, provider = stored.message.send_started_at, stored.event.provider
        if started is not None and (provider not in reach or started > reach[provider]):
            reach[provider] = started
    return reach


def _apply(stored: list[StoredEvent], report: ProcessReport) -> None:
    report.new, report.stored = len(stored), stored
    unknown = [s for s in stored if s.message is None]
    report.unknown = len(unknown)
    if unknown:
        logger.warning(
            "%d webhook events name unknown messages (kept), e.g. %s %s", len(unknown),
            unknown[0].event.provider, unknown[0].event.provider_message_id,
        )
    known = [s for s in stored if s.message is not None]
    # Only an ESP's events say how far its reports reach or that it accepted a message.
    from_esps = [s for s in known if s.event.provider != LINK_PROVIDER]
    ambiguous = [s for s in from_esps if s.message.status == EmailMessage.Status.AMBIGUOUS]
    if ambiguous:
        ambiguous_messages_reconcile(events=ambiguous)
    provider_events_seen(sent_until=_events_reach(from_esps))
    marks = marks_from_events(known)
    new_marks, moved_marks = marks_record(marks=marks)
    report.new_marks = len(new_marks)
    # The service's events: a message's first delivery, open, click, hard bounce, complaint or
    # drop, once each (the mark's first insert), in this transaction (decision 115).
    ledger.reported_events_record([(mid, _MARK_EVENTS[name], marks[(mid, name)],
                                    "hard" if name == "bounced" else None)
                                   for mid, name in sorted(new_marks) if name in _MARK_EVENTS])
    # Only messages whose marks changed can change status or timestamps: a repeated open of an
    # already-opened message costs no UPDATE (messages still SENDING are re-applied by a task).
    changed = {mid for mid, _ in new_marks | moved_marks}
    report.still_sending = message_statuses_apply(message_ids=sorted(changed)) if changed else []
    report.suppressed = suppressions_from_events(events=stored)
    refs = {s.message.id: s.message for s in known}
    campaign_marks = [
        (refs[mid].campaign_id, name) for mid, name in new_marks if refs[mid].campaign_id is not None
    ]
    # Counters and the minute tally of the stats (decision 125), under each campaign's counts
    # lock held shared, so a rebuild of them (recount_campaign) never sees half of this batch.
    campaign_counts_share(refs[mid].campaign_id for mid in refs if refs[mid].campaign_id is not None)
    campaign_counters_increment(new_marks=campaign_marks)
    campaign_tally_increment(campaign_tally_of_batch(stored=known, new_marks=new_marks, marks=marks))
    bad = {"bounced", "complained"}
    report.campaigns = {refs[m].campaign_id for m, n in new_marks if n in bad and refs[m].campaign_id}
    # A test key's bounces never hold its client's live sends (issue 27): they count for the
    # test campaign they belong to only.
    report.clients = {refs[m].client_id for m, n in new_marks
                      if n in bad and refs[m].client_id and refs[m].key_type != KeyType.TEST}
