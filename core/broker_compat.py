"""A worker survives a restart of its Redis broker instead of exiting.

Celery 5.7 / kombu 5.7: after a broker connection drops, the consumer calls `collect()`, which
detaches the Redis transport from its client (`transport.client = None`), and then closes the
connection, and later acks tasks that were running on the old channel. Both make that channel
build a new redis client from `transport.client`, which is None, so kombu raises
`AttributeError: 'NoneType' object has no attribute 'hostname'`. Celery only tolerates
connection errors there, reports "Unrecoverable error" and the whole worker exits: every pool on
that Redis at once (the million-day scenario lost both P0 pools for ~10 s per Redis restart).

`harden_redis_channel()` makes that case a redis ConnectionError, which kombu lists among the
transport's connection errors: closing the dead channel is then ignored, a late ack is logged
("Couldn't ack") and the consumer reconnects. Nothing is lost by skipping them: the broker that
held those unacked messages has restarted; the recovery loop re-publishes their rows and the
ledger's claim fences a second send. tests/e2e/test_broker_restart.py fails without this.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager


def harden_redis_channel() -> None:
    from kombu.transport import redis as kombu_redis
    from redis.exceptions import ConnectionError as RedisConnectionError

    channel = kombu_redis.Channel
    if getattr(channel._connparams, "_notifier_hardened", False):
        return
    original = channel._connparams

    @functools.wraps(original)
    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:
            raise RedisConnectionError("broker connection already closed (channel detached)")
        return original(self, asynchronous=asynchronous)

    _connparams._notifier_hardened = True
    channel._connparams = _connparams


def reuse_redis_publish_client() -> None:
    """One redis client per channel for publishing, instead of one per message (decision 52).

    kombu's Redis channel builds a new `redis.Redis` on every put (`conn_or_acquire()` without a
    client), whose constructor fills a table of ~170 response callbacks: ~0.2 ms of CPU per
    published task in the web process, for a client that only borrows a connection from the
    channel's pool. The client is thread-safe (each command takes a pool connection), so the
    channel keeps one; a new pool (after a reconnect) gets a new client.
    """
    from kombu.transport import redis as kombu_redis

    channel = kombu_redis.Channel
    if getattr(channel.conn_or_acquire, "_notifier_reused", False):
        return

    @contextmanager
    def conn_or_acquire(self, client=None):
        if client:
            yield client
            return
        pool = self.pool
        cached = self.__dict__.get("_notifier_publish_client")
        if cached is None or cached.connection_pool is not pool:
            cached = self._notifier_publish_client = self._create_client()
        yield cached

    conn_or_acquire._notifier_reused = True
    channel.conn_or_acquire = conn_or_acquire
