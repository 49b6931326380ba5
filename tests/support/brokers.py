"""A Redis of its own as this process's Celery broker, restarted for real by a test (no
persistence): its run id changes and its queues are empty, as after the million-email day's fault."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from notifier.celery import app as celery_app
from testkit.ports import free_port
from testkit.redis_server import dedicated_redis, wait_redis


class RestartableBroker:
    def __init__(self, port: int, log_dir: Path) -> None:
        self.port, self.log_dir = port, log_dir
        self.url = f"redis://127.0.0.1:{port}/0"
        self.server = None

    def start(self) -> None:
        self.server = dedicated_redis(self.port, self.log_dir).start()
        wait_redis(self.port)

    def restart(self) -> None:
        self.server.kill_group()
        self.start()

    def depth(self, queue: str) -> int:
        return redis.Redis.from_url(self.url).llen(queue)


@contextmanager
def restartable_broker(settings, log_dir: Path) -> Iterator[RestartableBroker]:
    """The dedicated Redis as this process's broker (publishes and reads) for the block."""
    server = RestartableBroker(free_port(), log_dir)
    server.start()
    previous = celery_app.conf.broker_url
    settings.CELERY_BROKER_URL = celery_app.conf.broker_url = server.url
    try:
        yield server
    finally:
        celery_app.conf.broker_url = previous
        server.server.kill_group()
