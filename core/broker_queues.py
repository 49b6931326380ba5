"""Tasks waiting in the broker per queue, and whether the broker restarted (reads only).

Depth is LLEN of the Celery queue lists: kombu's Redis transport keeps one list per queue, plus
one per priority step named `<queue>\\x06\\x16<step>`. It counts *tasks* (a batch task carries
several message ids), not messages. Another transport (RabbitMQ) reads as unknown (None).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis
from django.conf import settings

from core.priorities import ALL_QUEUES
from core.redis_client import broker_redis

logger = logging.getLogger(__name__)
KOMBU_PRIORITY_SEP = "\x06\x16"
KOMBU_PRIORITY_STEPS = (3, 6, 9)  # kombu's default priority_steps besides 0 (the bare name)


def _broker() -> redis.Redis | None:
    # e.g. RabbitMQ: None, its depth comes from its management API, not here
    return broker_redis(settings.CELERY_BROKER_URL, socket_timeout=2)


def broker_depths(queues: Sequence[str] = ALL_QUEUES) -> dict[str, int | None]:
    """Tasks waiting per queue name (None when the broker cannot be read)."""
    client = _broker()
    if client is None:
        return dict.fromkeys(queues)
    try:
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            pipe.llen(queue)
            for step in KOMBU_PRIORITY_STEPS:
                pipe.llen(f"{queue}{KOMBU_PRIORITY_SEP}{step}")
        lengths = pipe.execute()
    except redis.RedisError:
        logger.warning("broker unreachable for queue depths")
        return dict.fromkeys(queues)
    width = 1 + len(KOMBU_PRIORITY_STEPS)
    return {q: sum(lengths[i * width:(i + 1) * width]) for i, q in enumerate(queues)}


def broker_run_id() -> str | None:
    """The Redis broker's run id (INFO server): it changes when the server restarts, and a Redis
    restarted without persistence has lost every task it held. None: another transport, or the
    broker cannot be read."""
    client = _broker()
    if client is None:
        return None
    try:
        return client.info("server").get("run_id")
    except redis.RedisError:
        return None


class BrokerRunWatch:
    """Whether the Redis broker restarted since this watch last looked (its run id changed): a
    Redis restarted without persistence has lost every task it held. Kept in the memory of the
    process that looks; its first look only learns the id, and another transport never reads
    as restarted (a RabbitMQ broker keeps its durable queues)."""

    def __init__(self) -> None:
        self.run_id: str | None = None

    def restarted(self) -> bool:
        run_id = self.restart_seen()
        if run_id is not None:
            self.accept(run_id)
        return run_id is not None

    def restart_seen(self) -> str | None:
        """The broker's new run id if it restarted since the last accepted look, without
        accepting it: a caller whose response to the restart fails looks again next time."""
        run_id = broker_run_id()
        if run_id is None:
            return None
        if self.run_id is None:
            self.run_id = run_id  # the first look only learns the id
            return None
        return run_id if run_id != self.run_id else None

    def accept(self, run_id: str) -> None:
        self.run_id = run_id
