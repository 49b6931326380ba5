"""The one shared redis-py client, and the key layout of everything notifier keeps in Redis.

All keys live under one configurable prefix (`NOTIFIER_REDIS_PREFIX`, default `notifier`) so
that tests and several deployments can share a server. Layout (each area documents its own):

    notifier:idem:<client>:<key>        idempotency fast path (string, 7-day TTL)
    notifier:schedule:due               future sends (ZSET score=due epoch, member=message id)
    notifier:schedule:processing        claimed by a scheduler (ZSET score=lease deadline)

    $ redis-cli --scan --pattern 'notifier:*'
"""

from __future__ import annotations

from functools import cache
from urllib.parse import parse_qsl, urlencode

import redis
from django.conf import settings


@cache
def get_redis() -> redis.Redis:
    """A process-wide client (redis-py pools connections; safe across threads)."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )


def redis_url_of_broker(broker_url: str) -> str | None:
    """The redis-py URL of a Redis Celery broker (None for another transport).

    kombu spells a unix socket `redis+socket:///path?virtual_host=N`; redis-py wants
    `unix:///path?db=N`.
    """
    if broker_url.startswith("redis+socket://"):
        path, _, query = broker_url.removeprefix("redis+socket://").partition("?")
        params = dict(parse_qsl(query))
        database = params.pop("virtual_host", params.pop("db", "0"))
        return f"unix://{path}?{urlencode({**params, 'db': database})}"
    if broker_url.startswith(("redis://", "rediss://", "unix://")):
        return broker_url
    return None


def redis_key(*parts: str | int) -> str:
    """Build a key under the configured prefix: redis_key('idem', 3, 'abc')."""
    return ":".join([settings.REDIS_KEY_PREFIX, *map(str, parts)])
