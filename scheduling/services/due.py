"""The Redis side of the scheduler: future sends waiting for their time.

Keys (all under the configured prefix, see core.redis_client):

    notifier:schedule:due          ZSET score = due time (epoch seconds), member = message id
    notifier:schedule:processing   ZSET score = lease deadline (epoch seconds), member = message id
    notifier:schedule:lock         STRING holder token, TTL = NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS
    notifier:schedule:built        STRING "done", or the last id a rebuild in progress has added:
                                   missing means Redis lost the sets (restart, flush, failover)

    $ redis-cli ZCOUNT notifier:schedule:due -inf $(date +%s)     # due now, not yet claimed
    $ redis-cli ZRANGE notifier:schedule:due 0 9 WITHSCORES        # the next ten
    $ redis-cli ZRANGE notifier:schedule:processing 0 -1 WITHSCORES
    $ redis-cli GET notifier:schedule:lock

PostgreSQL stays the record (status SCHEDULED + `scheduled_for`); these sets are an index that
the scheduler rebuilds by itself when `built` is missing (scheduling/services/rebuild.py), and
`python manage.py rebuild_schedule` rebuilds on demand. Every change is one Lua script or one command,
so two schedulers never hold the same claim at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from core.lua import script
from core.redis_client import get_redis, redis_key

ZADD_CHUNK = 10_000


def due_key() -> str:
    return redis_key("schedule", "due")


def processing_key() -> str:
    return redis_key("schedule", "processing")


def built_key() -> str:
    return redis_key("schedule", "built")


BUILT = "done"


def due_set_built() -> str | None:
    """"done", the last id a rebuild in progress added, or None: the due set was lost."""
    raw = get_redis().get(built_key())
    return raw.decode() if isinstance(raw, bytes) else raw


def due_set_built_mark(value: str, *, only_if_present: bool) -> bool:
    """Record the rebuild's progress (an id) or its end (BUILT). `only_if_present`: False when
    the key vanished meanwhile (Redis lost it again): the rebuild must start over."""
    return bool(get_redis().set(built_key(), value, xx=only_if_present or None))


@dataclass(frozen=True)
class Claim:
    ids: list[int]
    claimed_at: float
    lease_deadline: float


def messages_schedule(*, items: Iterable[tuple[int, datetime]]) -> int:
    """Add (message_id, due datetime) pairs to the due set; returns how many were given.

    The rows must already be committed as SCHEDULED with `scheduled_for` (the record); a
    repeated call only re-scores the same members, so it never creates a duplicate.
    """
    client = get_redis()
    count = 0
    mapping: dict[str, float] = {}
    for message_id, due in items:
        mapping[str(message_id)] = due.timestamp()
        count += 1
        if len(mapping) >= ZADD_CHUNK:
            client.zadd(due_key(), mapping)
            mapping = {}
    if mapping:
        client.zadd(due_key(), mapping)
    return count


def due_claim(*, now: float, limit: int, lease_seconds: float) -> Claim:
    """Atomically move up to `limit` ids due at `now` into processing with a lease."""
    deadline = round(now + lease_seconds, 3)
    raw = script("schedule_claim")(keys=[due_key(), processing_key()], args=[now, limit, deadline])
    return Claim(ids=[int(x) for x in raw], claimed_at=now, lease_deadline=deadline)


def due_ack(*, claim: Claim, message_ids: Sequence[int]) -> int:
    """Remove handled ids from processing, only where this claim still holds them."""
    if not message_ids:
        return 0
    return int(script("schedule_ack")(keys=[processing_key()], args=[claim.lease_deadline, *message_ids]))


def due_return(*, claim: Claim, items: Sequence[tuple[int, float]]) -> int:
    """Claimed ids that are not due after all (early clock, rescheduled) back to the due set."""
    if not items:
        return 0
    args: list[float | int] = [claim.lease_deadline]
    for message_id, score in items:
        args += [score, message_id]
    return int(script("schedule_return")(keys=[processing_key(), due_key()], args=args))


def due_reap(*, now: float, limit: int = 10_000) -> list[int]:
    """Expired leases back to the due set (due now); returns the ids."""
    raw = script("schedule_reap")(keys=[processing_key(), due_key()], args=[now, limit])
    return [int(x) for x in raw]


def due_restore(*, items: Sequence[tuple[int, float]], dry_run: bool = False) -> int:
    """Add (id, due epoch) pairs unless the id is claimed right now (rebuild after Redis loss);
    `dry_run` counts what it would add, in the same script, and writes nothing."""
    if not items:
        return 0
    args: list[float | int | str] = ["count" if dry_run else "write"]
    for message_id, score in items:
        args += [score, message_id]
    return int(script("schedule_restore")(keys=[due_key(), processing_key()], args=args))


def due_remove(*, message_ids: Sequence[int]) -> int:
    """Forget ids (cancelled sends): the database fence would skip them anyway."""
    if not message_ids:
        return 0
    return int(get_redis().zrem(due_key(), *message_ids))


@dataclass(frozen=True)
class DueStats:
    due_now: int
    future: int
    processing: int
    oldest_due_epoch: float | None


def due_stats(*, now: float) -> DueStats:
    client = get_redis()
    with client.pipeline(transaction=False) as pipe:
        pipe.zcount(due_key(), "-inf", now)
        pipe.zcard(due_key())
        pipe.zcard(processing_key())
        pipe.zrange(due_key(), 0, 0, withscores=True)
        due_now, total, processing, oldest = pipe.execute()
    return DueStats(
        due_now=due_now,
        future=total - due_now,
        processing=processing,
        oldest_due_epoch=oldest[0][1] if oldest else None,
    )
