"""Campaign work lost with the broker: fan-outs (e.g. the broker was down when the campaign was
launched), send tasks and progress-check chains (a Redis broker restarted without persistence).

A campaign whose fan-out has not finished (QUEUED: never started; SCHEDULED or SENDING: started)
and whose `fanout_cursor` has not moved for NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS gets its
fan-out task published again. That is safe: the fan-out takes a per-campaign advisory lock (a
second copy returns at once), resumes from its cursor and inserts with ON CONFLICT DO NOTHING.
The scheduler's dispatcher-lock holder runs the sweep (scheduling run_scheduler); see
`campaigns_stalled_sends_republish` for the sends.

Redis keys (core.redis_client.redis_key):

    notifier:campaigns:fanout_watch:<campaign id>   "<fanout_cursor>:<epoch seconds>" (1 h TTL)

    $ redis-cli GET notifier:campaigns:fanout_watch:42
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from campaigns.jobs import campaign_fanout_enqueue
from campaigns.models import Campaign
from campaigns.services.lifecycle import campaign_complete
from campaigns.services.progress import campaign_stalled_republish
from core.broker_queues import BrokerRunWatch, broker_depths
from core.priorities import SEND_QUEUES, queue_for
from core.redis_client import get_redis, redis_key

logger = logging.getLogger(__name__)
CS = Campaign.Status
SWEEP_LIMIT = 200
KEY_TTL_SECONDS = 3600


def campaigns_lost_fanout_republish(*, now: float | None = None) -> list[int]:
    """Publish the fan-out again for campaigns with no fan-out progress; returns their ids."""
    now = time.time() if now is None else now
    stall = settings.NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS
    created_before = timezone.now() - timedelta(seconds=stall)
    candidates = list(
        Campaign.objects.filter(status__in=[CS.QUEUED, CS.SCHEDULED, CS.SENDING], fanout_done=False,
                                created_at__lt=created_before)
        .order_by("id").values_list("id", "fanout_cursor")[:SWEEP_LIMIT]
    )
    redis = get_redis()
    kicked = []
    for campaign_id, cursor in candidates:
        key = redis_key("campaigns", "fanout_watch", campaign_id)
        previous = redis.get(key)
        if previous is not None:
            seen_cursor, _, since = previous.decode().partition(":")
            if int(seen_cursor) == cursor and now - float(since) < stall:
                continue
            if int(seen_cursor) != cursor:
                redis.set(key, f"{cursor}:{now}", ex=KEY_TTL_SECONDS)
                continue
        # First sight (already older than the stall time) or no progress for the stall time.
        redis.set(key, f"{cursor}:{now}", ex=KEY_TTL_SECONDS)
        campaign_fanout_enqueue(campaign_id)
        kicked.append(campaign_id)
    if kicked:
        logger.warning("re-published the fan-out of campaigns %s (no progress for %ss)", kicked, stall)
    return kicked


class BrokerRestartWatch:
    """The broker's run id as this process last read it, and the campaigns that were active when
    it changed and have not been published again since (a Redis restarted without persistence
    lost their queued tasks, and their progress-check chains with them).

    Kept in the memory of the process that sweeps (the scheduler's lock holder): a scheduler that
    starts after the restart never saw the old id, and its campaigns wait out the stall time.
    """

    def __init__(self) -> None:
        self.runs = BrokerRunWatch()
        self.awaiting: set[int] = set()

    def look(self, active: set[int]) -> set[int]:
        """Read the broker's run id; the active campaigns still awaiting their re-publish."""
        if self.runs.restarted():
            logger.warning("the broker restarted: campaigns %s may have lost their tasks", sorted(active))
            self.awaiting |= active
        self.awaiting &= active  # completed, paused or cancelled since: nothing to do
        return set(self.awaiting)

    def settle(self, campaign_id: int) -> None:
        """The campaign was published again, or its queue survived the restart."""
        self.awaiting.discard(campaign_id)


broker_restarts = BrokerRestartWatch()


def campaigns_stalled_sends_republish() -> int:
    """Campaigns whose fan-out finished but whose QUEUED rows stopped moving get those rows
    published again; returns how many rows. A campaign with nothing left is completed.

    The per-campaign progress check re-schedules itself through the broker, so a broker that
    loses its queues (Redis restarted without persistence) loses that chain with the send tasks.
    This sweep runs from the scheduler, outside the broker, and does the chain's work:
    `campaign_complete`, then `campaign_stalled_republish`, which acts after no progress for
    NOTIFIER_REQUEUE_AFTER_SECONDS, or at once for a campaign active when the broker restarted
    whose send queue it finds empty (a queue that survived the restart is left alone). The claim
    fences any duplicate task.
    """
    active = dict(
        Campaign.objects.filter(status__in=[CS.QUEUED, CS.SENDING], fanout_done=True)
        .order_by("id").values_list("id", "priority")[:SWEEP_LIMIT]
    )
    awaiting = broker_restarts.look(set(active))
    depths = broker_depths(SEND_QUEUES) if awaiting else {}
    republished = 0
    for campaign_id, priority in active.items():
        if campaign_complete(campaign_id=campaign_id):
            continue
        awaited = campaign_id in awaiting
        lost = awaited and depths.get(queue_for(priority)) == 0
        rows = campaign_stalled_republish(campaign_id=campaign_id, tasks_lost=lost)
        if awaited and (rows or not lost):  # published again; or its queue survived, or is unread
            broker_restarts.settle(campaign_id)
        republished += rows
    if republished:
        logger.warning("re-published %d stalled campaign messages (tasks lost)", republished)
    return republished


def campaigns_recovery_sweep() -> None:
    """The scheduler's campaign sweep (registered with scheduling/extensions.py): fan-outs lost
    with the broker, then sends that stalled."""
    campaigns_lost_fanout_republish()
    campaigns_stalled_sends_republish()
