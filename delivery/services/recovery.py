"""Recover from crashed workers: the loop that keeps "nothing lost" true.

Run every few seconds by the scheduler process. Claims abandoned before the hand-off go back to
their queue (safe: nothing reached a provider); sends handed over with no recorded answer become
AMBIGUOUS (unsafe to repeat blindly), and AMBIGUOUS rows are settled from the ESP's evidence
(delivery/services/ambiguity.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from core.broker_queues import BrokerRunWatch, broker_depths
from core.priorities import SEND_QUEUES, Priority, claim_lease_seconds, queue_for, requeue_after_seconds
from delivery.services import ledger
from delivery.services.ambiguity import ambiguous_messages_resolve
from delivery.services.dispatch import messages_enqueue_by_priority
from delivery.services.stalled_sends import stalled_sends_settle

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryReport:
    requeued: int
    orphans: int
    ambiguous: int
    resent: int = 0  # AMBIGUOUS rows the evidence says never arrived (delivery/services/ambiguity.py)


def _cutoffs(now: datetime, seconds_for: Callable[[Priority, float], float],
             ceiling: float) -> dict[Priority, datetime]:
    """Per priority: the instant before which a row of that priority is overdue."""
    return {p: now - timedelta(seconds=seconds_for(p, ceiling)) for p in Priority}


def _tasks_in_broker() -> dict[Priority, int]:
    """Send tasks the broker still holds per priority; none where its depth cannot be read
    (another transport, or the broker down): every old row is then a candidate, as before."""
    depths = broker_depths(SEND_QUEUES)  # read on every tick: the send queues only
    return {p: depths[queue_for(p)] or 0 for p in Priority}


# The broker's run id as the recovering process last read it (the scheduler's lock holder).
_broker_runs = BrokerRunWatch()


def _republish_after_broker_restart(now: datetime) -> list[tuple[int, int]]:
    """Every QUEUED transactional row at once when the broker restarted since the last tick
    (decision 78): a few P0 tasks queued or prefetched when Redis restarted would otherwise
    wait out P0's re-publish age (5 s) or more, against its 0.5 s p99."""
    run_id = _broker_runs.restart_seen()
    if run_id is None:
        return []
    lost = ledger.queued_transactional_requeue(published_before=now)
    if lost:
        messages_enqueue_by_priority(lost)
    # Only now: a sweep that failed (a deadlock, the broker still down) runs again next tick,
    # where before it was forgotten and the rows waited out the age rule (P3: ~60 s).
    _broker_runs.accept(run_id)
    logger.warning("the broker restarted: re-published %d queued transactional messages", len(lost))
    return lost


def stalled_messages_recover() -> RecoveryReport:
    now = timezone.now()
    lost_with_broker = _republish_after_broker_restart(now)
    released = ledger.stale_claims_release(
        claimed_before=_cutoffs(now, claim_lease_seconds, settings.NOTIFIER_CLAIM_LEASE_SECONDS))
    if released:
        messages_enqueue_by_priority(released)
        logger.warning("requeued %d messages abandoned before hand-off", len(released))
    orphans = ledger.orphaned_messages_claim_requeue(
        older_than=_cutoffs(now, requeue_after_seconds, settings.NOTIFIER_REQUEUE_AFTER_SECONDS),
        in_broker=_tasks_in_broker())
    if orphans:
        messages_enqueue_by_priority(orphans)
        logger.warning("re-published %d queued messages whose task may be lost", len(orphans))
    ambiguous_after = timedelta(seconds=settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS)
    stalled = stalled_sends_settle(started_before=now - ambiguous_after)
    if stalled.ambiguous or stalled.released or stalled.sent:
        logger.warning("sends with no provider answer: %d held as AMBIGUOUS, %d never left (queued "
                       "again), %d accepted (send journal)", stalled.ambiguous, stalled.released,
                       stalled.sent)
    resolved = ambiguous_messages_resolve(now=now)
    return RecoveryReport(requeued=len(released) + stalled.released,
                          orphans=len(orphans) + len(lost_with_broker),
                          ambiguous=stalled.ambiguous, resent=resolved.resent)
