"""Personal-data removal after each service's retention (issue 30, decision 120).

The policy is clients' (clients/retention.py); the rows are other apps': each registers a step
from its `AppConfig.ready()` (delivery: the messages and what hangs off them; eventlog: the
service event log; feedback: ESP events no message batch reached, webhook bodies; campaigns: an
ended campaign's inline recipients, decision 130; scheduling: a cancelled schedule's, decision
132). A step is
`f(run) -> {what: rows}`: it removes (or, on a dry run, counts) what is due under `run`'s
policies, in batches of `run.batch_size`, one transaction each, and stops when `run` is out of
time. Every step is resumable: a batch commits whole, and what is done is either out of the
rows it selects (a scrubbed message or campaign leaves its partial index) or behind a
`RetentionMark`.

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

from django.db import connection, transaction
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


# --- A step over a small table: pick due rows by their service's cutoff, strip them ------------

def stream_cutoffs(run: ExpireRun, stream: str) -> list[object]:
    """The parameters of a pick over one stream's policies: each known service's id and cutoff
    (two arrays, for an `unnest` join), the latest cutoff of all (the due index's range), and the
    defaults' (rows whose service was deleted)."""
    policies = [policy for policy in run.policies if policy.stream == stream]
    known = [policy for policy in policies if policy.service_id is not None]
    defaults = next(p for p in policies if p.service_id is None).cutoff(run.as_of)
    latest = max(policy.cutoff(run.as_of) for policy in policies)
    return [[p.service_id for p in known], [p.cutoff(run.as_of) for p in known], latest, defaults]


@dataclass(frozen=True)
class PickAndStrip:
    """A registered step over a small table (decisions 130, 132): the rows of `table` (as
    `alias`) that `due` picks (its due index's predicate, as the index has it, so the planner
    reads it) whose `end` is before their service's cutoff for `stream` (a deleted service's
    rows: the defaults'; a service created after the run read its policies: the next run), oldest
    first; `strip` (a SET list whose one placeholder is the ids' list) must take a row out of
    `due`. Batch after batch, one transaction each, until one comes back short or the run is out
    of time; counted, not changed, on a dry run. {what: rows}."""

    what: str
    stream: str
    table: str
    alias: str
    due: str
    end: str
    strip: str

    @property
    def _rows(self) -> str:
        # unnest: each row against its own service's cutoff, one statement however many services.
        a = self.alias
        return (f"FROM {self.table} {a} LEFT JOIN unnest(%s::text[], %s::timestamptz[]) AS p(service_id, "
                f"before) ON p.service_id = {a}.client_id WHERE {self.due} AND {self.end} < %s "
                f"AND {self.end} < CASE WHEN {a}.client_id IS NULL THEN %s::timestamptz ELSE p.before END")

    @property
    def pick_sql(self) -> str:
        return (f"SELECT {self.alias}.id {self._rows} ORDER BY {self.end}, {self.alias}.id LIMIT %s "
                f"FOR UPDATE OF {self.alias} SKIP LOCKED")

    @property
    def count_sql(self) -> str:
        return f"SELECT count(*) {self._rows}"

    @property
    def strip_sql(self) -> str:
        return f"UPDATE {self.table} SET personal_data_removed_at = %s, {self.strip} WHERE id = ANY(%s)"

    def __call__(self, run: ExpireRun) -> dict[str, int]:
        params = stream_cutoffs(run, self.stream)
        if run.dry_run:
            with connection.cursor() as cursor:
                cursor.execute(self.count_sql, params)
                return {self.what: cursor.fetchone()[0]}
        removed = 0
        while not run.out_of_time():
            taken = self._batch(params, run.batch_size)
            removed += taken
            if taken < run.batch_size:
                break
        return {self.what: removed}

    def _batch(self, params: list[object], limit: int) -> int:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(self.pick_sql, [*params, limit])
            ids = [row[0] for row in cursor.fetchall()]
            if ids:
                cursor.execute(self.strip_sql, [timezone.now(), ids])
        return len(ids)


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
