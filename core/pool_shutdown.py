"""A prefork pool child finishes the task it is running when its pool is sent SIGTERM.

A deploy stops a worker with SIGTERM: Celery's warm shutdown lets the running tasks end, then
stops. But honcho (`make run`, the Procfile), systemd's default `KillMode=control-group` and a
PaaS dyno send the SIGTERM to every process of the pool, children included, and Celery resets a
child's SIGTERM to the default action (`celery.concurrency.prefork.WORKER_SIGRESET`): each child
died mid-send, rows already handed to the ESP were left SENDING (AMBIGUOUS after the recovery's
lease, never resent blindly), and the warm shutdown had nothing left to wait for. Only `docker
stop`, which signals a container's PID 1 alone, got the warm shutdown (F14,
tests/delivery/test_deploy_sigterm.py; docs/decisions.md 93).

Here a child ignores SIGTERM while it runs a task, so the main process's warm shutdown waits
for that task as it waits for any other; once the task has ended the child is closed by the
pool as usual. Between tasks SIGTERM does what billiard makes it do (its `_shutdown_cleanup`,
installed after Celery's child initialiser: leave through the `finally` blocks), so billiard can
still stop idle children with it (autoscale shrinking, a pool's terminate).

The price: Celery's cold shutdown (SIGQUIT, a second Ctrl-C) cancels running tasks with that
same SIGTERM, so it now waits for them too, as the warm one does. Cancelling a send mid-flight
only ever made AMBIGUOUS rows; a task that must be stopped at once is stopped with SIGKILL (what
every supervisor sends after its grace period), or by a hard time limit (SIGKILL too).
An ignored signal is a disposition, not a Python handler: it holds while the child waits in C
(a socket read from the ESP or PostgreSQL), and billiard's `reset_signals` leaves it alone.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from celery.signals import task_postrun, task_prerun, worker_process_init

_between_tasks: signal.Handlers | int | Callable | None = None


def _task_started(**_: object) -> None:
    """task_prerun, in a pool child: SIGTERM is ignored until the task has ended."""
    global _between_tasks
    _between_tasks = signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _task_ended(**_: object) -> None:
    """task_postrun, in a pool child: SIGTERM back to what it was between tasks."""
    if _between_tasks is not None:
        signal.signal(signal.SIGTERM, _between_tasks)


def _in_pool_child(**_: object) -> None:
    """worker_process_init: runs in each prefork child, and only there (a threads pool runs its
    tasks off the main thread, where no signal disposition may be changed)."""
    task_prerun.connect(_task_started, weak=False, dispatch_uid="pool-child-task-started")
    task_postrun.connect(_task_ended, weak=False, dispatch_uid="pool-child-task-ended")


def finish_running_tasks_on_sigterm() -> None:
    """Install the behaviour in every prefork child of this process's worker (a threads pool
    has no child: SIGTERM reaches its main process only, which shuts down warm)."""
    worker_process_init.connect(_in_pool_child, weak=False, dispatch_uid="pool-child-sigterm")
