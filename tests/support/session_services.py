"""The services of one test session, as pytest hooks (tests/conftest.py imports them).

- Without DATABASE_URL / REDIS_URL the session starts the embedded PostgreSQL and Redis
  (devtools/embedded.py) and stops them at its end, unless they were already running (for
  example under `make run`): then it uses them and leaves them be. No process is left behind.
- The tests never use the configured Redis database itself but the next one up, and under
  pytest-xdist every worker gets its own test database (pytest-django suffixes the name) and
  its own Redis database, so the Celery queues, due sets and rate-limit buckets of one
  worker's tests are invisible to another's. RabbitMQ has one vhost: tests that use it share the
  `amqp` xdist group, which runs on a single worker.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from django.conf import settings

_STARTED = pytest.StashKey[list]()
REDIS_DATABASES = 16  # redis-server's default `databases`


def pytest_configure(config: pytest.Config) -> None:
    # In-process tests edit client rows directly (last_used_at, expiry) and expect the very next
    # request to see the row: this process verifies every key. The processes tests start keep
    # the default; tests/transactional/test_accept_caches.py tests the cache (decision 53).
    settings.NOTIFIER_API_KEY_CACHE_SECONDS = 0.0
    # Status callbacks go to receivers the tests start on 127.0.0.1 (decision 113).
    settings.NOTIFIER_CALLBACKS_ALLOW_LOOPBACK = True
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # the controller started the services
        _use_worker_redis_database(int(worker.removeprefix("gw")))
        return
    started = []
    if not os.environ.get("DATABASE_URL") and settings.EMBEDDED_POSTGRES.start(durable=False):
        started.append(settings.EMBEDDED_POSTGRES)
    if not os.environ.get("REDIS_URL") and settings.EMBEDDED_REDIS.start():
        started.append(settings.EMBEDDED_REDIS)
    config.stash[_STARTED] = started
    # Never the configured database itself: a `make run` sharing the embedded Redis keeps its
    # queues and due set (the tests purge theirs).
    _use_worker_redis_database(0)


def pytest_unconfigure(config: pytest.Config) -> None:
    for service in reversed(config.stash.get(_STARTED, [])):
        service.stop()


def _use_worker_redis_database(index: int) -> None:
    """Move this xdist worker's Redis client and Celery broker to a database of its own."""
    from core.redis_client import get_redis
    from notifier.celery import app

    database = (redis_database(settings.REDIS_URL) + 1 + index) % REDIS_DATABASES
    settings.REDIS_URL = with_redis_database(settings.REDIS_URL, database)
    if settings.CELERY_BROKER_URL.startswith(("redis://", "redis+socket://", "unix://")):
        settings.CELERY_BROKER_URL = with_redis_database(settings.CELERY_BROKER_URL, database)
    app.conf.broker_url = settings.CELERY_BROKER_URL
    if "CELERY_BROKER_URL" in os.environ:
        # Celery prefers the environment's URL to app.conf's: without this, an exported
        # CELERY_BROKER_URL put every xdist worker's tasks on one database.
        os.environ["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    get_redis.cache_clear()


def redis_database(url: str) -> int:
    parts = urlsplit(url)
    if parts.scheme in ("redis", "rediss"):
        return int(parts.path.lstrip("/") or 0)
    query = dict(parse_qsl(parts.query))
    return int(query.get("db") or query.get("virtual_host") or 0)


def with_redis_database(url: str, database: int) -> str:
    """The same Redis URL on another database: a /N path for TCP, a query for unix sockets."""
    parts = urlsplit(url)
    if parts.scheme in ("redis", "rediss"):
        return urlunsplit(parts._replace(path=f"/{database}"))
    key = "virtual_host" if parts.scheme == "redis+socket" else "db"
    query = dict(parse_qsl(parts.query))
    query[key] = str(database)
    # Not urlunsplit: it drops the empty authority of unix:///path (redis-py needs the "//").
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode(query)}"
