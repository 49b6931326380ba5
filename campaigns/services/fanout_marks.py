"""How far each fan-out range's publishing got, so that a restarted fan-out re-publishes only the
rows committed after it (decision 73).

A range's mark is a contact id: every row the range committed for contacts up to it has had its
batch task published. The publisher thread moves it after each chunk's publish (chunks publish
in order), so a crash between a chunk's commit and its publish leaves the mark behind the
cursor, and the restart publishes (mark, upper] again. A mark that cannot be read (Redis lost,
expired) means "nothing known": the range is re-published whole, as before the marks. So a mark
may lag (a duplicate task, fenced by the claim) but never runs ahead of a publish.

A broker that lost its queues loses these tasks whatever the marks say: decision 72's restart
watch and the stall rule re-publish such campaigns whole, and so does a resume after a pause
(the paused campaign's tasks were consumed and skipped).

    notifier:campaigns:fanout_published:<campaign id>   hash: range index ("all" for a single
                                                        range) -> contact id (TTL 2 days)

    $ redis-cli HGETALL notifier:campaigns:fanout_published:42
"""

from __future__ import annotations

import logging

import redis

from core.redis_client import get_redis, redis_key

logger = logging.getLogger(__name__)
MARK_TTL_SECONDS = 2 * 24 * 3600
SINGLE_RANGE = "all"


def fanout_marks_key(campaign_id: int) -> str:
    return redis_key("campaigns", "fanout_published", campaign_id)


def range_field(range_index: int | None) -> str:
    return SINGLE_RANGE if range_index is None else str(range_index)


def fanout_published_mark(campaign_id: int, range_index: int | None, contact_id: int) -> None:
    """Every row of this range up to `contact_id` has been published (called after the publish)."""
    key = fanout_marks_key(campaign_id)
    try:
        pipe = get_redis().pipeline(transaction=False)
        pipe.hset(key, range_field(range_index), contact_id)
        pipe.expire(key, MARK_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError:
        # A mark left behind costs a restart duplicate tasks (fenced by the claim), not a row.
        logger.warning("fan-out publish mark of campaign %s not recorded", campaign_id, exc_info=True)


def fanout_published_marks(campaign_id: int) -> dict[str, int]:
    """Range field -> contact id published through; {} when unknown (re-publish everything)."""
    try:
        raw = get_redis().hgetall(fanout_marks_key(campaign_id))
    except redis.RedisError:
        logger.warning("fan-out publish marks of campaign %s unreadable", campaign_id, exc_info=True)
        return {}
    return {field.decode(): int(value) for field, value in raw.items()}
