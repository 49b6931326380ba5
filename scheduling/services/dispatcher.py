"""Move due messages from the Redis due set to their priority queues, exactly once.

One batch: claim (Lua, ids -> processing with a lease) -> fence (one guarded UPDATE in
PostgreSQL, SCHEDULED -> QUEUED only where `scheduled_for <= now()`) -> publish the rows the
UPDATE returned (delivery.services.dispatch) -> acknowledge (remove from processing).

Why it cannot dispatch twice or early: the UPDATE is the decision. A second scheduler holding
the same id (the first one stalled past its lease, the reaper gave the id back) finds the row
QUEUED and publishes nothing; a cancelled row is CANCELLED; a row claimed early is returned to
the due set. Why nothing is lost: ids leave Redis only when acknowledged after the publish; a
scheduler that dies before that leaves them in processing, and the reaper returns them. A
scheduler that died after the UPDATE but before the publish left rows QUEUED, never claimed by
a worker, stamped (`requeued_at`) well before the new claim: those are published again (a
second publish of a row whose task exists is harmless, the worker claim lets one send).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection

from delivery.models import EmailMessage
from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue_by_priority
from scheduling import extensions, signals
from scheduling.services import due

logger = logging.getLogger(__name__)
Status = EmailMessage.Status
# Do not start a step with less than this left on the lease: a step that outlived its lease
# could race the scheduler that reaped it (harmless, but wasted).
LEASE_MARGIN_SECONDS = 1.0


@dataclass
class DispatchReport:
    claimed: int = 0
    dispatched: int = 0
    returned: int = 0
    abandoned: int = 0

    def add(self, other: DispatchReport) -> None:
        self.claimed += other.claimed
        self.dispatched += other.dispatched
        self.returned += other.returned
        self.abandoned += other.abandoned


def messages_fence_queue_detailed(
    *, message_ids: Sequence[int], dispatched_before: datetime, fence_by: datetime | None = None
) -> tuple[list[tuple[int, int]], set[int]]:
    """SCHEDULED -> QUEUED for rows due by the database clock: [(id, priority)] to publish.

    Also returns rows a scheduler fenced before `dispatched_before` that no worker has claimed
    since: their ids came back through the reaper, so that scheduler never acknowledged them and
    may have died before publishing. `dispatched_before` is half a lease before this claim, so a
    row dispatched moments ago and put back by a concurrent rebuild is not published again.
    """
    fetched = ledger.scheduled_messages_fence(message_ids=message_ids, dispatched_before=dispatched_before,
                                              fence_by=fence_by)
    return [(row[0], row[1]) for row in fetched], {row[2] for row in fetched if row[2] is not None}


def _still_scheduled(message_ids: Sequence[int]) -> list[tuple[int, float]]:
    rows = EmailMessage.objects.filter(id__in=list(message_ids), status=Status.SCHEDULED)
    return [(pk, when.timestamp()) for pk, when in rows.values_list("id", "scheduled_for") if when]


def _lease_left(claim: due.Claim) -> bool:
    margin = min(LEASE_MARGIN_SECONDS, (claim.lease_deadline - claim.claimed_at) / 4)
    return time.time() < claim.lease_deadline - margin


def due_batch_dispatch(*, now: float | None = None, limit: int | None = None) -> DispatchReport:
    """Claim, fence, publish and acknowledge one batch of due ids."""
    now = time.time() if now is None else now
    limit = limit or settings.NOTIFIER_SCHEDULE_CLAIM_BATCH
    claim = due.due_claim(now=now, limit=limit, lease_seconds=settings.NOTIFIER_SCHEDULE_LEASE_SECONDS)
    report = DispatchReport(claimed=len(claim.ids))
    if not claim.ids:
        return report
    signals.due_batch_claimed.send(
        sender=__name__, message_ids=claim.ids, lease_deadline=claim.lease_deadline
    )
    if not _lease_left(claim):
        report.abandoned = len(claim.ids)  # the reaper gives them back; someone else dispatches
        return report
    lease = settings.NOTIFIER_SCHEDULE_LEASE_SECONDS
    dispatched_before = datetime.fromtimestamp(claim.claimed_at - lease / 2, tz=UTC)
    # The fence must stamp its rows within half a lease of the claim: a successor that gets
    # these ids back (claim + lease at the earliest) republishes rows stamped before its own
    # claim - lease/2. A fence stamped later would look "just dispatched" to it, and if this
    # scheduler then abandons its batch, nobody would publish them (docs/decisions.md 60).
    fence_by = datetime.fromtimestamp(claim.claimed_at + lease / 2, tz=UTC)
    rows, campaign_ids = messages_fence_queue_detailed(
        message_ids=claim.ids, dispatched_before=dispatched_before, fence_by=fence_by
    )
    if campaign_ids:
        extensions.campaigns_fell_due(campaign_ids)  # campaigns promotes SCHEDULED -> SENDING
    signals.due_batch_fenced.send(
        sender=__name__, message_ids=[pk for pk, _ in rows], lease_deadline=claim.lease_deadline
    )
    if rows and not _lease_left(claim):
        report.abandoned = len(claim.ids)  # rows stay QUEUED unclaimed: the next claim republishes
        return report
    messages_enqueue_by_priority(rows)
    report.dispatched = len(rows)
    dispatched = {pk for pk, _ in rows}
    rest = [pk for pk in claim.ids if pk not in dispatched]
    back = _still_scheduled(rest) if rest else []
    report.returned = due.due_return(claim=claim, items=back)
    returned = {pk for pk, _ in back}
    due.due_ack(claim=claim, message_ids=[pk for pk in claim.ids if pk not in returned])
    return report


def _drain_loop(deadline: float, keep_going: Callable[[], bool]) -> DispatchReport:
    total = DispatchReport()
    limit = settings.NOTIFIER_SCHEDULE_CLAIM_BATCH
    try:
        while time.monotonic() < deadline and keep_going():
            report = due_batch_dispatch(limit=limit)
            total.add(report)
            if report.claimed < limit or report.returned == report.claimed:
                break  # drained, or only ids the database clock says are not due yet
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection.close()  # each thread had its own connection
    return total


def due_drain(
    *, budget_seconds: float, keep_going: Callable[[], bool] = lambda: True, threads: int | None = None
) -> DispatchReport:
    """Dispatch batches while full ones keep coming, within a time budget (a backlog drains
    at full speed instead of one batch per tick).

    When the first batch is full (a backlog), `threads` claim/fence/publish loops run at once,
    each with its own database connection: the guarded UPDATE is most of the cost, PostgreSQL
    runs two of them in parallel, and meanwhile another loop talks to Redis and the broker.
    Claims never overlap (Lua), so the loops need no coordination.
    """
    threads = threads or settings.NOTIFIER_SCHEDULE_DISPATCH_THREADS
    deadline = time.monotonic() + budget_seconds
    total = due_batch_dispatch()
    if total.claimed < settings.NOTIFIER_SCHEDULE_CLAIM_BATCH or total.returned == total.claimed:
        return total
    if threads <= 1:
        total.add(_drain_loop(deadline, keep_going))
        return total
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dispatch") as pool:
        for report in pool.map(lambda _: _drain_loop(deadline, keep_going), range(threads)):
            total.add(report)
    return total
