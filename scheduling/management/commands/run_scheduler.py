"""python manage.py run_scheduler: the scheduler process.

Ticks every second. Today each tick runs the recovery loop (stale claims back to their queue,
lost tasks re-published, unanswered hand-offs held as AMBIGUOUS); the due-set dispatcher of the
scheduling engine joins this loop. Several can run at once: every step is fenced in the database.
"""

from __future__ import annotations

import logging
import signal
import time

from django.core.management.base import BaseCommand, CommandParser
from django.db import OperationalError, close_old_connections

from delivery.services.recovery import stalled_messages_recover

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run the scheduler loop (recovery of stalled sends; due-time dispatch)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks")
        parser.add_argument("--once", action="store_true", help="run one tick and exit")

    def handle(self, *args: object, **options: object) -> None:
        self._running = True
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        interval = float(options["interval"])
        while self._running:
            self._tick()
            if options["once"]:
                return
            time.sleep(interval)

    def _tick(self) -> None:
        close_old_connections()
        try:
            report = stalled_messages_recover()
        except OperationalError:
            logger.exception("database unavailable; retrying next tick")
            return
        if report.requeued or report.orphans or report.ambiguous:
            self.stdout.write(str(report))

    def _stop(self, *_: object) -> None:
        self._running = False
