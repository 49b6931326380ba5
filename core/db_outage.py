"""A PostgreSQL outage as a process meets it, and how work waits one out instead of being dropped.

An outage is a crash and restart (the server refuses connections, then answers "the database
system is starting up / in recovery mode" while it replays the WAL), a failover, or connections
killed while the server stays up (`pg_terminate_backend`, a proxy restart). The client sees
`OperationalError` without an SQLSTATE (refused, "server closed the connection unexpectedly"),
one with a class 08 (connection exception) or 57P0x (operator intervention) code, or
`InterfaceError` ("connection already closed") on a connection an earlier error broke.

Two ways to wait it out (docs/decisions.md 82):

- `OutageRetryTask`, the Celery app's task class: a task that meets an outage is published again
  with a capped backoff and no retry limit, instead of failing and being acknowledged (gone). Its
  work must be safe to run again, which every task's is (claims, cursors, ON CONFLICT).
- `hold_through_outage(write)`: a write whose outcome this process must know, because it knows
  something the database does not yet (a provider's answer in hand; a hand-off mark about to be
  acted on), is retried in place until the database answers, for up to
  `NOTIFIER_DB_OUTAGE_HOLD_SECONDS`. The write must be idempotent: run twice, it changes the
  rows once (the send path's writes are guarded by state and claim token, or by the exact
  timestamp the first run wrote).
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Callable
from typing import TypeVar

from celery import Task
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)
T = TypeVar("T")

# SQLSTATE classes and codes that mean "this connection or the server is gone for now", not
# "this statement is wrong": connection exceptions, insufficient resources (too many
# connections), and operator intervention (admin shutdown 57P01, crash shutdown 57P02, cannot
# connect now 57P03: starting up or in recovery). Not 57014 (a statement timeout).
_UNAVAILABLE_SQLSTATES = ("08", "53", "57P")
# What a caller catches to ask `database_unavailable`: PEP 249 puts InterfaceError beside
# DatabaseError, not under it.
DATABASE_ERRORS = (DatabaseError, InterfaceError)
BACKOFF_FIRST_SECONDS = 0.25
BACKOFF_CAP_SECONDS = 5.0
# Celery reads max_retries=None as "the task's default" (3): an outage is waited out however long.
UNLIMITED_RETRIES = sys.maxsize


# Two transactions that each wait for the other (40P01), or a serializable one that lost (40001):
# the statement was right and another run of it will pass.
_CONFLICT_SQLSTATES = ("40001", "40P01")


def transaction_conflict(exc: BaseException) -> bool:
    """True if `exc` is a deadlock or a serialization failure: nothing is wrong with the
    database or the statement, and the work is simply run again (a loop's next tick)."""
    code = getattr(exc, "pgcode", None) or getattr(exc.__cause__, "pgcode", None)
    return code in _CONFLICT_SQLSTATES


def database_unavailable(exc: BaseException) -> bool:
    """True if `exc` says the database cannot be reached now (worth waiting for), False if it
    says something about the statement or the data (retrying would fail the same way).

    Narrower than `core.api.errors.is_outage`, on purpose: that one decides what a client is
    answered 503 for (a statement timeout too: "retry later" is the right answer to a client),
    this one what work waits out before running again.

    psycopg2 reports a connection lost mid-statement as `OperationalError` or, from some calls,
    as the bare `DatabaseError` ("server closed the connection unexpectedly"), in both cases
    without an SQLSTATE: the server never answered. Subclasses that carry a verdict on the
    statement (IntegrityError, DataError, ProgrammingError, ...) are never an outage."""
    if isinstance(exc, InterfaceError):
        return True
    if type(exc) not in (OperationalError, DatabaseError):
        return False
    code = getattr(exc.__cause__, "pgcode", None)
    return code is None or code.startswith(_UNAVAILABLE_SQLSTATES)


def database_connections_reset() -> None:
    """Close this thread's database connections, so that the next query opens a fresh one
    instead of failing on a socket the outage broke."""
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except DATABASE_ERRORS:  # closing a broken connection may itself fail: it is gone anyway
            logger.debug("closing a broken connection failed", exc_info=True)


def database_outage_seen(exc: BaseException) -> bool:
    """True, with this thread's connections closed, if `exc` is a database outage: the next
    query opens a new connection instead of failing on the one the outage broke."""
    if not database_unavailable(exc):
        return False
    database_connections_reset()
    return True


def outage_backoff_seconds(attempt: int) -> float:
    """Capped exponential backoff with jitter: 0.25 s, 0.5 s, 1 s, ... at most 5 s (a restart
    is usually seconds; the first tries come quickly so work resumes as soon as it is back)."""
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** min(attempt, 16))
    return random.uniform(ceiling / 2, ceiling)


def hold_through_outage(write: Callable[[], T], *, what: str) -> T:
    """`write()`, run again after each outage error until it succeeds; raises the last error
    once `NOTIFIER_DB_OUTAGE_HOLD_SECONDS` have passed, and any other error at once."""
    deadline = time.monotonic() + settings.NOTIFIER_DB_OUTAGE_HOLD_SECONDS
    attempt = 0
    while True:
        try:
            return write()
        except DATABASE_ERRORS as exc:
            if not database_outage_seen(exc) or time.monotonic() >= deadline:
                raise
            if attempt == 0:
                logger.warning("database unavailable while %s; holding until it is back: %s", what, exc)
            time.sleep(outage_backoff_seconds(attempt))
            attempt += 1


class OutageRetryTask(Task):
    """The Celery app's task class: a task that meets a database outage runs again later.

    Celery would otherwise log "raised unexpected", acknowledge the message and forget it (a
    PostgreSQL crash mid-campaign dropped 243 send tasks in one second). Here the task is
    published again under the same id (send_batch's claim token), after a capped backoff, with
    no retry limit: work that needs the database waits for it rather than being lost.
    """

    def __call__(self, *args: object, **kwargs: object) -> object:
        try:
            return super().__call__(*args, **kwargs)
        except DATABASE_ERRORS as exc:
            if self.request.is_eager or not database_outage_seen(exc):
                raise
            countdown = outage_backoff_seconds(self.request.retries or 0)
            logger.warning("%s[%s]: database unavailable (%s); again in %.1f s",
                           self.name, self.request.id, type(exc).__name__, countdown)
            raise self.retry(exc=exc, countdown=countdown, max_retries=UNLIMITED_RETRIES) from exc
