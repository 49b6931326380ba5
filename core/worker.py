"""Start the Celery worker pool of one role: python -m core.worker critical|high|normal|low|ops|callbacks

Each priority gets its own process pool, consuming only its own queue, so an OTP never waits
behind prefetched campaign batches (design decision 7). Pool sizes come from
core/priorities.py, and so does each pool's CPU niceness (bulk pools yield the CPU to P0/P1
and the API); `NOTIFIER_WORKER_POOL` picks prefork (default: survives a crashing
child, and the crash tests need real child processes) or threads, and
`NOTIFIER_WORKER_POOL_<ROLE>` (e.g. NOTIFIER_WORKER_POOL_CRITICAL=threads) picks it for one role.
A threads pool skips the parent-to-child hand-off of every task (decision 81 measures it); what a
crash costs changes: the whole process and every task in flight in it, which the ledger's lease
and re-publish bring back as they do for a killed prefork pool.
"""

from __future__ import annotations

import os
import sys

from core.priorities import (
    CALLBACKS_QUEUE,
    MAINTENANCE_QUEUE,
    POOLS,
    STATUS_QUEUE,
    WEBHOOK_QUEUE,
    Priority,
    pool_nice,
    pool_size,
)

# The P0/P1 pools send no Celery task events unless NOTIFIER_FAST_POOL_TASK_EVENTS=true: three
# events per message were ~15% of the critical pool's CPU per OTP (docs/decisions.md 55). The
# ledger, /metrics and `celery inspect` still see these pools; Flower shows their workers, not
# their tasks (the Procfile's Flower no longer switches events on in every worker).
FAST_ROLES = ("critical", "high")


def worker_environment(role: str, environ: dict[str, str]) -> dict[str, str]:
    """What this role's pool changes in its environment before Celery reads the settings."""
    if role in FAST_ROLES and environ.get("NOTIFIER_FAST_POOL_TASK_EVENTS", "").lower() != "true":
        return {"NOTIFIER_TASK_EVENTS": "false"}
    return {}


def _node_name(role: str) -> str:
    """`<role>@<host>`, or NOTIFIER_WORKER_NAME: two workers of one role on one host must differ
    (RabbitMQ holds each node's control queue exclusively)."""
    return os.environ.get("NOTIFIER_WORKER_NAME") or f"{role}@%h"


# Roles whose pool is threads unless their own NOTIFIER_WORKER_POOL_<ROLE> says otherwise: the
# callbacks pool waits on receivers' answers (up to the timeout each), not on the CPU.
THREADED_ROLES = ("callbacks",)
ROLES = ("critical", "high", "normal", "low", "ops", "callbacks")


def pool_kind(role: str) -> str:
    """prefork or threads: the role's own setting, else the one for every role."""
    own = os.environ.get(f"NOTIFIER_WORKER_POOL_{role.upper()}")
    if role in THREADED_ROLES:
        return own or "threads"
    return own or os.environ.get("NOTIFIER_WORKER_POOL", "prefork")


def worker_argv(role: str) -> list[str]:
    pool = pool_kind(role)
    # The project's Celery app and settings are named, not imported (as manage.py names them):
    # this entry point stays below the configuration it starts.
    # --quiet: no start-up banner (~30 lines of configuration and task names per pool); the
    # "<node> ready." line and everything logged after it stay.
    argv = ["celery", "-A", "notifier", "--quiet", "worker",
            "--loglevel", os.environ.get("NOTIFIER_LOG_LEVEL", "INFO")]
    argv += ["-P", pool, "--without-gossip", "--without-mingle"]
    if role == "ops":
        queues = ",".join([STATUS_QUEUE, WEBHOOK_QUEUE, MAINTENANCE_QUEUE])
        concurrency = os.environ.get("NOTIFIER_WORKER_OPS_CONCURRENCY", "2")
        return [*argv, "-Q", queues, "-n", _node_name("ops"), "--concurrency", concurrency]
    if role == "callbacks":
        concurrency = os.environ.get("NOTIFIER_WORKER_CALLBACKS_CONCURRENCY", "8")
        return [*argv, "-Q", CALLBACKS_QUEUE, "-n", _node_name("callbacks"), "--concurrency", concurrency]
    priority = Priority.from_label(role)
    config = POOLS[priority]
    low, high = pool_size(priority)
    argv += ["-Q", config.queue, "-n", _node_name(role)]
    argv += ["--prefetch-multiplier", str(config.prefetch_multiplier)]
    if low == high or pool != "prefork":
        return [*argv, "--concurrency", str(high)]
    return [*argv, f"--autoscale={high},{low}"]


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in ROLES:
        sys.exit(f"usage: python -m core.worker {'|'.join(ROLES)}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")
    role = sys.argv[1]
    argv = worker_argv(role)
    os.environ.update(worker_environment(role, dict(os.environ)))
    # Names the pool's PostgreSQL sessions (libpq reads PGAPPNAME): pg_stat_activity then says
    # which pool runs a statement, and a host running both can renice the bulk pools' backends.
    os.environ.setdefault("PGAPPNAME", f"notifier-{role}")
    nice = 0 if role in ("ops", "callbacks") else pool_nice(Priority.from_label(role))
    if nice > 0:
        os.nice(nice)  # inherited by the pool's children
    os.execvp(sys.executable, [sys.executable, "-m", *argv])


if __name__ == "__main__":
    main()
