"""Recover from crashed workers: the loop that keeps "nothing lost" true.

Run every few seconds by the scheduler process. Claims abandoned before the hand-off go back to
their queue (safe: nothing reached a provider); sends handed over with no recorded answer become
AMBIGUOUS (unsafe to repeat; reconciled from webhooks or a provider lookup).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue_by_priority
from notifier.priorities import Priority, claim_lease_seconds, requeue_after_seconds

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryReport:
    requeued: int
    orphans: int
    ambiguous: int


def stalled_messages_recover() -> RecoveryReport:
    now = timezone.now()
    lease_ceiling = settings.NOTIFIER_CLAIM_LEASE_SECONDS
    released = ledger.stale_claims_release(claimed_before={
        p: now - timedelta(seconds=claim_lease_seconds(p, lease_ceiling)) for p in Priority})
    if released:
        messages_enqueue_by_priority(released)
        logger.warning("requeued %d messages abandoned before hand-off", len(released))
    requeue_ceiling = settings.NOTIFIER_REQUEUE_AFTER_SECONDS
    orphans = ledger.orphaned_messages_claim_requeue(older_than={
        p: now - timedelta(seconds=requeue_after_seconds(p, requeue_ceiling)) for p in Priority})
    if orphans:
        messages_enqueue_by_priority(orphans)
        logger.warning("re-published %d queued messages whose task may be lost", len(orphans))
    ambiguous_after = timedelta(seconds=settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS)
    ambiguous = ledger.stalled_sends_mark_ambiguous(started_before=now - ambiguous_after)
    if ambiguous:
        logger.warning("%d sends have no provider answer; held as AMBIGUOUS", ambiguous)
    return RecoveryReport(requeued=len(released), orphans=len(orphans), ambiguous=ambiguous)
