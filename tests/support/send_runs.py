"""Send runs with real worker processes: ledger rows to send, the pools that send them, and what
became of the rows (the fault tests of tests/delivery and tests/e2e)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from delivery.models import EmailMessage
from testkit import processes
from tests.factories import template_version

Status = EmailMessage.Status
UNFINISHED = (Status.QUEUED, Status.SENDING)


class Spawn(Protocol):
    """The `spawn` fixture: starts a process and stops it at teardown."""

    def __call__(self, process: processes.ManagedProcess) -> processes.ManagedProcess: ...


def messages_create(n: int, priority: int, *, domain: str = "example.com", prefix: str = "u") -> list[int]:
    """`n` QUEUED rows of one new template version, `<prefix><i>@<domain>`; their ids."""
    version = template_version()
    rows = EmailMessage.objects.bulk_create(
        EmailMessage(recipient=f"{prefix}{i}@{domain}", context={"name": f"N{i}"},
                     template_version=version, priority=priority,
                     idempotency_key=f"{prefix}-{version.id}-{i}")
        for i in range(n)
    )
    return [row.id for row in rows]


def settled(ids: list[int]) -> bool:
    """No row of `ids` is still waiting to be sent or being sent."""
    return not EmailMessage.objects.filter(id__in=ids, status__in=UNFINISHED).exists()


def statuses(ids: list[int]) -> dict[str, int]:
    """How many rows of `ids` are in each status."""
    out: dict[str, int] = {}
    for status in EmailMessage.objects.filter(id__in=ids).values_list("status", flat=True):
        out[status] = out.get(status, 0) + 1
    return out


def send_workers(spawn: Spawn, log_dir: Path, env: dict[str, str], role: str, *, count: int = 1,
                 concurrency: int = 2) -> list[processes.ManagedProcess]:
    """`count` workers of one priority's pool (distinct node names and logs), once ready."""
    started = []
    for i in range(count):
        worker = processes.celery_worker(role, env, log_dir, concurrency=concurrency)
        worker.name = f"{worker.name}-{i}"
        worker.log_path = log_dir / f"{worker.name}.log"
        offset = len(worker.log())  # a restarted worker appends to its first run's log
        started.append((spawn(worker), offset))
    for worker, offset in started:
        worker.wait_for_log("ready.", timeout=60, after=offset)
    return [worker for worker, _ in started]
