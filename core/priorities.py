"""Priorities, their Celery queues and their worker-pool settings, in one place.

Production defaults mirror the design table (docs/architecture.md): each priority has its own
queue and its own worker pool so bulk work never sits in front of an OTP. Batch size is how
many message ids one task carries: 1 for P0 (latency), up to 500 for P3 (broker cost amortised;
one task per email tops out near 430 tasks/s on 2 cores, measured in the design notes).

`NOTIFIER_WORKER_SCALE` (0 < scale <= 1) shrinks every pool for a laptop or a 2-core machine;
`NOTIFIER_WORKER_<P0..P3>_CONCURRENCY` pins one pool's size exactly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import IntEnum


class Priority(IntEnum):
    CRITICAL = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> Priority:
        return cls[label.upper()]


@dataclass(frozen=True)
class PoolConfig:
    queue: str
    autoscale_min: int
    autoscale_max: int
    prefetch_multiplier: int
    batch_size: int
    max_send_attempts: int
    sla_seconds: int
    # A claim abandoned before the hand-off (its worker died) returns to the queue after this;
    # a transactional row still QUEUED after `requeue_after_seconds` is published again (its
    # task may have died with a whole pool or with the broker). Both must be well inside the
    # SLA: a killed P0 pool costs at most its lease plus one recovery tick. A lease that expires
    # on a slow but live worker costs only latency: its hand-off mark then fails (claim token).
    claim_lease_seconds: int
    requeue_after_seconds: int
    # CPU niceness of the pool's processes: on a shared host the kernel then hands a free core to
    # an OTP or the API before a campaign batch, while bulk pools still use every idle cycle.
    # P3 sits level with P2, not below it: a digest due at 9am is late by the time its pool waits
    # for a core, and its small pool caps what it can take from a campaign (decision 112).
    nice: int


POOLS: dict[Priority, PoolConfig] = {
    Priority.CRITICAL: PoolConfig("email-send-p0", 5, 20, 1, 1, 5, 10, 4, 5, 0),
    Priority.HIGH: PoolConfig("email-send-p1", 5, 30, 1, 10, 5, 60, 15, 30, 0),
    Priority.NORMAL: PoolConfig("email-send-p2", 10, 100, 4, 100, 8, 15 * 60, 60, 120, 10),
    Priority.LOW: PoolConfig("email-send-p3", 2, 20, 4, 500, 8, 60 * 60, 120, 300, 10),
}

STATUS_QUEUE = "email-status"
WEBHOOK_QUEUE = "email-webhook"
MAINTENANCE_QUEUE = "maintenance"
# Status callbacks to the services' own URLs (callbacks/): a pool of their own, so a slow or
# dead receiver holds its threads and never an email's worker.
CALLBACKS_QUEUE = "callbacks"
SEND_QUEUES = tuple(pool.queue for pool in POOLS.values())
ALL_QUEUES = (*SEND_QUEUES, STATUS_QUEUE, WEBHOOK_QUEUE, MAINTENANCE_QUEUE, CALLBACKS_QUEUE)


def queue_for(priority: Priority | int) -> str:
    """The Celery queue that carries sends of this priority."""
    return POOLS[Priority(priority)].queue


def batch_size_for(priority: Priority | int) -> int:
    return POOLS[Priority(priority)].batch_size


def claim_lease_seconds(priority: Priority | int, ceiling: float) -> float:
    """This priority's claim lease, capped by the operator's global `ceiling`."""
    return min(POOLS[Priority(priority)].claim_lease_seconds, ceiling)


def requeue_after_seconds(priority: Priority | int, ceiling: float) -> float:
    """Age after which this priority's QUEUED transactional row is re-published, capped."""
    return min(POOLS[Priority(priority)].requeue_after_seconds, ceiling)


def pool_nice(priority: Priority) -> int:
    """Niceness for this priority's pool; `NOTIFIER_WORKER_P<n>_NICE` overrides (0 disables)."""
    pinned = os.environ.get(f"NOTIFIER_WORKER_P{int(priority)}_NICE")
    return int(pinned) if pinned else POOLS[priority].nice


def pool_size(priority: Priority) -> tuple[int, int]:
    """(min, max) processes for this priority's pool after env overrides."""
    pool = POOLS[priority]
    pinned = os.environ.get(f"NOTIFIER_WORKER_P{int(priority)}_CONCURRENCY")
    if pinned:
        return int(pinned), int(pinned)
    scale = float(os.environ.get("NOTIFIER_WORKER_SCALE", "1"))
    low = max(1, round(pool.autoscale_min * scale))
    high = max(low, round(pool.autoscale_max * scale))
    return low, high
