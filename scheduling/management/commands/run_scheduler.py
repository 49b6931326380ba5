"""python manage.py run_scheduler: the scheduler process.

Each tick (default every second): the holder of the dispatcher lock rebuilds the due set from
PostgreSQL if Redis lost it (a step at a time), returns expired claims to the due set and
dispatches every due message (scheduling.services.dispatcher), then every
scheduler runs the recovery loop (stale claims back to their queue, lost tasks re-published,
unanswered hand-offs held as AMBIGUOUS), and campaign fan-outs and send tasks lost on the way to
or inside the broker are published again (campaigns.services.recovery), from a thread of its own
so a long re-publish never delays the tick. Several can run at once: the lock only saves work,
every step is fenced in the database.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections, connection
from django.utils import timezone
from redis.exceptions import RedisError

from core.db_outage import DATABASE_ERRORS, database_outage_seen, transaction_conflict
from delivery.services.recovery import stalled_messages_recover
from scheduling import extensions
from scheduling.services import due
from scheduling.services.dispatcher import due_drain
from scheduling.services.lock import DispatcherLock
from scheduling.services.rebuild import due_set_restore_step, overdue_schedule_restore

logger = logging.getLogger(__name__)
CAMPAIGN_SWEEP_MAX_SECONDS = 5.0  # the campaign sweep runs at least this often
RESTORE_STEP_SECONDS = 1.0  # of a tick spent rebuilding a lost due set (~100k rows a second)


class Command(BaseCommand):
    help = "Run the scheduler loop (due-time dispatch; recovery of stalled sends)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks")
        parser.add_argument("--once", action="store_true", help="run one tick and exit")

    def handle(self, *args: object, **options: object) -> None:
        self._running = True
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        interval = float(options["interval"])
        self._next_sweep = 0.0
        self._next_campaign_sweep = 0.0
        self._sweeper: threading.Thread | None = None
        self._restored = 0  # scheduled messages the current due-set rebuild has put back
        self._lock = DispatcherLock(ttl_seconds=settings.NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS)
        self.stdout.write(f"scheduler ready (lock token {self._lock.token})")
        try:
            while self._running:
                started = time.monotonic()
                self._tick(budget=max(interval, settings.NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS / 2))
                if options["once"]:
                    if self._sweeper is not None:
                        self._sweeper.join()
                    return
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            self._release()

    def _tick(self, *, budget: float) -> None:
        close_old_connections()
        try:
            self._dispatch(budget)
        except Exception as exc:
            # Database, Redis or broker down: nothing is lost (claims return after their lease,
            # fenced rows are republished), so log and try again next tick.
            logger.exception("dispatch failed; claims come back after their lease")
            database_outage_seen(exc)  # the recovery below then opens a new connection
        try:
            report = stalled_messages_recover()
        except DATABASE_ERRORS as exc:
            if transaction_conflict(exc):  # the process lives on: the next tick runs it again
                logger.warning("recovery met a transaction conflict; again next tick: %s", exc)
                return
            if not database_outage_seen(exc):
                raise
            logger.warning("database unavailable; recovery again next tick: %s", exc)
            return
        if report.requeued or report.orphans or report.ambiguous or report.resent:
            self.stdout.write(str(report))

    def _dispatch(self, budget: float) -> None:
        if not self._lock.acquire_or_refresh():
            return
        self._due_set_restore()
        reaped = due.due_reap(now=time.time())
        if reaped:
            logger.warning("returned %d expired claims to the due set", len(reaped))
        self._sweep()
        self._campaign_sweep()
        report = due_drain(budget_seconds=budget, keep_going=self._lock.acquire_or_refresh)
        if report.claimed:
            self.stdout.write(
                f"dispatched {report.dispatched} of {report.claimed} claimed "
                f"(returned {report.returned}, abandoned {report.abandoned})"
            )

    def _due_set_restore(self) -> None:
        """Redis lost the due set (restart, flush): rebuild it from PostgreSQL, a bounded step per
        tick so what is already back in it is dispatched in between (before this, it waited for
        an operator's `rebuild_schedule` or the overdue sweep: up to 90 s late)."""
        step = due_set_restore_step(budget_seconds=RESTORE_STEP_SECONDS)
        if step is None:
            return
        if step.started:
            self._restored = 0
            logger.info("the due set has no record of being built (a first start, or Redis lost it): "
                        "building it from PostgreSQL")
        self._restored += step.added
        if step.done and self._restored:  # a first start with nothing scheduled says no more
            logger.warning("due set rebuilt from PostgreSQL: %d scheduled messages written back "
                           "(Redis restarted or flushed, or a first start)", self._restored)

    def _sweep(self) -> None:
        if time.monotonic() < self._next_sweep:
            return
        self._next_sweep = time.monotonic() + settings.NOTIFIER_SCHEDULE_SWEEP_SECONDS
        overdue_before = timezone.now() - timedelta(seconds=settings.NOTIFIER_SCHEDULE_OVERDUE_SECONDS)
        restored = overdue_schedule_restore(overdue_before=overdue_before)
        if restored:
            logger.warning("re-added %d overdue scheduled messages to the due set", restored)

    def _campaign_sweep(self) -> threading.Thread | None:
        """Campaign fan-outs, and campaign send tasks, lost with the broker are published again.

        In a thread of its own: after a broker loss, re-publishing a 1M campaign's rows takes
        tens of seconds, and inline it held up the tick that dispatches due sends and recovers
        P0 rows (1M run: one OTP 22 s late, scheduled-send lateness p99 31 s).
        """
        if time.monotonic() < self._next_campaign_sweep:
            return None
        if self._sweeper is not None and self._sweeper.is_alive():
            return None
        stall = settings.NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS
        # Its stall rules keep their own clocks (a first sight and a time per campaign), so a
        # sweep every few seconds acts no sooner than they say; what it shortens is the wait of a
        # campaign whose tasks the broker is known to have lost (a restart), and its completion.
        self._next_campaign_sweep = time.monotonic() + min(CAMPAIGN_SWEEP_MAX_SECONDS, max(1.0, stall / 4))
        self._sweeper = threading.Thread(target=_campaign_sweep_run, name="campaign-sweep", daemon=True)
        self._sweeper.start()
        return self._sweeper

    def _release(self) -> None:
        try:
            self._lock.release()
        except RedisError:
            logger.warning("could not release the dispatcher lock; it expires on its own")

    def _stop(self, *_: object) -> None:
        self._running = False


def _campaign_sweep_run() -> None:
    try:
        extensions.run_sweeps()  # campaign recovery, registered by campaigns/apps.py
    except Exception:
        # Database or broker down: the next sweep interval tries again; nothing is lost.
        logger.exception("campaign sweep failed; retrying at the next interval")
    finally:
        connection.close()  # this thread's own connection
