"""Watch a sending campaign: complete it when nothing is left, re-publish it when it stalls.

A campaign whose rows sit QUEUED with none in flight and no progress for
`NOTIFIER_REQUEUE_AFTER_SECONDS` has lost its tasks (e.g. Redis restarted without persistence):
its unclaimed rows are published again (the claim fences any duplicate task). When the broker
is known to have lost them (campaigns/services/recovery.py watches a Redis broker's run id), they
are published again as soon as nothing is in flight.

Redis keys (core.redis_client.redis_key):

    notifier:campaigns:progress:<campaign id>   "<finished rows>:<epoch seconds>" (1 h TTL)

    $ redis-cli GET notifier:campaigns:progress:42
"""

from __future__ import annotations

import time

from django.conf import settings

from campaigns.models import Campaign
from campaigns.selectors import campaign_status_counts
from campaigns.services.fanout import campaign_unclaimed_republish
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage

MS = EmailMessage.Status
KEY_TTL_SECONDS = 3600


def campaign_stalled_republish(*, campaign_id: int, tasks_lost: bool = False) -> int:
    """Rows published again (0 unless the campaign stalled). `tasks_lost`: the broker is known to
    have lost them (it restarted and the campaign's queue is empty): no stall time to wait out."""
    key = redis_key("campaigns", "progress", campaign_id)
    redis = get_redis()
    # A sending campaign almost always has a batch in flight: that one-row probe answers it. The
    # per-status count walks every row of the campaign (~1 s of PostgreSQL at 1M rows, every
    # PROGRESS_CHECK_SECONDS), so it runs only when nothing is in flight (decision 68).
    if EmailMessage.objects.filter(campaign_id=campaign_id, status=MS.SENDING).exists():
        redis.delete(key)
        return 0
    counts = campaign_status_counts(campaign_id=campaign_id)
    queued, in_flight = counts.get(MS.QUEUED, 0), counts.get(MS.SENDING, 0)
    if not queued or in_flight:
        redis.delete(key)
        return 0
    finished = sum(counts.values()) - queued
    now = time.time()
    stalled = tasks_lost
    if not stalled:
        since = _unchanged_since(redis.get(key), finished)
        if since is not None and now - since < settings.NOTIFIER_REQUEUE_AFTER_SECONDS:
            return 0  # no progress yet, not for long: the clock keeps running
        stalled = since is not None
    redis.set(key, f"{finished}:{now}", ex=KEY_TTL_SECONDS)
    return campaign_unclaimed_republish(campaign=Campaign.objects.get(pk=campaign_id))[0] if stalled else 0


def _unchanged_since(previous: bytes | None, finished: int) -> float | None:
    """Since when the campaign has had `finished` rows done (None: first sight, or it moved)."""
    if previous is None:
        return None
    last_finished, _, since = previous.decode().partition(":")
    return float(since) if int(last_finished) == finished else None
