"""Personal-data removal after each service's retention (issue 30, decision 120).

The policy is clients' (clients/retention.py); the rows are other apps': each registers a step
from its `AppConfig.ready()` (delivery: the messages and what hangs off them; eventlog: the
service event log; feedback: ESP events no message batch reached, webhook bodies). A step is
`f(run) -> {what: rows}`: it removes (or, on a dry run, counts) what is due under `run`'s
policies, in batches of `run.batch_size`, one transaction each, and stops when `run` is out of
time. Every step is resumable: a batch commits whole, and what is done is either out of the
rows it selects (a scrubbed message leaves its partial index) or behind a `RetentionMark`.

Two callers: the scheduler's lock holder (`personal_data_sweep`, registered by scheduling: at
most once a minute, every few seconds while a backlog lasts, at most SWEEP_STEP_SECONDS each)
and `manage.py expire_data` (everything due, or a dry run's counts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from clients.models import RetentionMark, Service
from clients.retention import STREAMS, retention_defaults, retention_effective
from core.throttle import AtMostEvery

logger = logging.getLogger(__name__)
DEFAULT_BATCH = 1000
SWEEP_STEP_SECONDS = 1.0
SWEEP_EVERY_SECONDS = 60.0
# A sweep that spent its whole step left rows due (an old install's first removal, a day of
# 10M messages: issue 30 measured 1,350-3,900 messages/s, so a second a minute keeps up with
# 2-5M a day): the next step comes this soon instead, up to one second in every five.
BACKLOG_EVERY_SECONDS = 5.0
_sweep_throttle = AtMostEvery(SWEEP_EVERY_SECONDS)


@dataclass(frozen=True)
class Policy:
    """One stream of one service; `service_id` None: rows whose service was deleted (their
    owner column is NULL), kept under the defaults."""

    service_id: str | None
    stream: str
    personal_data_days: int

    def cutoff(self, as_of: datetime) -> datetime:
        """Rows created (or recorded) before this lose their personal data."""
        return as_of - timedelta(days=self.personal_data_days)


@dataclass
class ExpireRun:
    as_of: datetime
    batch_size: int
    dry_run: bool
    policies: list[Policy]
    deadline: float | None = None  # time.monotonic() after which a step stops

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def latest_cutoff(self) -> datetime:
        """The cutoff of the shortest retention of all: what no service keeps longer than."""
        return max(policy.cutoff(self.as_of) for policy in self.policies)


Step = Callable[[ExpireRun], dict[str, int]]
_steps: list[tuple[int, str, Step]] = []


def register_personal_data_step(name: str, step: Step, *, order: int) -> None:
    """`order`: steps run lowest first (the messages before the stragglers they leave)."""
    if all(registered is not step for _, _, registered in _steps):
        _steps.append((order, name, step))
        _steps.sort(key=lambda item: item[0])


def retention_policies() -> list[Policy]:
    """Every service's streams (one query over the small service table), and the defaults for
    rows of deleted services."""
    defaults = retention_defaults()
    policies = [Policy(None, stream, defaults.personal_data_days) for stream in STREAMS]
    for service_id, stored in Service.objects.order_by("pk").values_list("pk", "retention"):
        for stream, kept in retention_effective(stored).items():
            policies.append(Policy(service_id, stream, kept.personal_data_days))
    return policies


def personal_data_expire(*, as_of: datetime | None = None, batch_size: int = DEFAULT_BATCH,
                         budget_seconds: float | None = None, dry_run: bool = False) -> dict[str, int]:
    """Remove the personal data every retention has passed by `as_of` (now), batch after batch,
    until none is left or `budget_seconds` is spent; {what: rows} (counted, not removed, on a
    dry run)."""
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    run = ExpireRun(as_of=as_of or timezone.now(), batch_size=batch_size, dry_run=dry_run,
                    policies=retention_policies(), deadline=deadline)
    done: dict[str, int] = {}
    for _order, _name, step in list(_steps):
        if run.out_of_time():
            break
        for what, rows in step(run).items():
            done[what] = done.get(what, 0) + rows
    return done


def personal_data_sweep() -> None:
    """The scheduler's periodic step (scheduling registers it): at most once a minute per
    process (every BACKLOG_EVERY_SECONDS while a backlog lasts), at most SWEEP_STEP_SECONDS of
    removal."""
    if not _sweep_throttle.due():
        return
    began = time.monotonic()
    done = personal_data_expire(budget_seconds=SWEEP_STEP_SECONDS)
    if time.monotonic() - began >= SWEEP_STEP_SECONDS:
        _sweep_throttle.due_within(BACKLOG_EVERY_SECONDS)
    if any(done.values()):
        logger.info("personal data removed: %s", ", ".join(f"{k} {v}" for k, v in done.items() if v))


# --- Where a walk over an append-only table stands ---------------------------------------------

@dataclass(frozen=True)
class Mark:
    at: datetime | None
    id: int

    def at_least(self, other: Mark) -> Mark:
        """The later of two marks: a walk never goes back (a cutoff moves back when a service
        lengthens its retention; what was stripped before stays stripped)."""
        if other.at is None:
            return self
        if self.at is None:
            return other
        return max(self, other, key=lambda mark: (mark.at, mark.id))


def mark_read(key: str) -> Mark:
    row = RetentionMark.objects.filter(key=key).values_list("through_at", "through_id").first()
    return Mark(*row) if row else Mark(None, 0)


def mark_write(key: str, mark: Mark) -> None:
    """Called in the batch's own transaction: the mark moves if and only if the batch commits."""
    RetentionMark.objects.update_or_create(key=key, defaults={"through_at": mark.at, "through_id": mark.id})
