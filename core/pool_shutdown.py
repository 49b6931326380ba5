"""A prefork pool child finishes the job it has taken when its pool is sent SIGTERM.

A deploy stops a worker with SIGTERM: Celery's warm shutdown lets the running tasks end, then
stops. But honcho (`make run`, the Procfile), systemd's default `KillMode=control-group` and a
PaaS dyno send the SIGTERM to every process of the pool, children included, and billiard makes
a child leave on SIGTERM (`_shutdown_cleanup`, raising SystemExit): each child died mid-send,
rows already handed to the ESP were left SENDING (AMBIGUOUS after the recovery's lease, never
resent blindly), and the warm shutdown had nothing left to wait for. Only `docker stop`, which
signals a container's PID 1 alone, got the warm shutdown (F14, tests/delivery/test_deploy_sigterm.py;
docs/decisions.md 93).

Here a child ignores SIGTERM from the moment it takes a job off the pool's queue until it has
written the job's result back to the main process, and answers it as billiard does while it
waits for the next job, so billiard can still stop idle children with it (autoscale shrinking, a
pool's terminate). The main process's warm shutdown then waits for that job as for any other.
The window used to be narrower (Celery's task_prerun to task_postrun, decision 93): a SIGTERM
landing while the child acknowledged the job to the main process, or after the task while it
wrote the result, still killed it, and the main process logged the job as lost
(WorkerLostError, 1 run in 3 of the F14 test). The window is now billiard's own job loop
(`Worker.workloop`): the receive method that takes a job is wrapped, so it covers every step
between two receives, in the order billiard performs them.

The price: Celery's cold shutdown (SIGQUIT, a second Ctrl-C) cancels running tasks with that
same SIGTERM, so it now waits for them too, as the warm one does. Cancelling a send mid-flight
only ever made AMBIGUOUS rows; a task that must be stopped at once is stopped with SIGKILL (what
every supervisor sends after its grace period), or by a hard time limit (SIGKILL too).
An ignored signal is a disposition, not a Python handler: it holds while the child waits in C
(a socket read from the ESP or PostgreSQL), in every thread of the child.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from billiard import pool as billiard_pool
from celery.concurrency import asynpool, prefork

Receive = Callable[..., object]


def hold_sigterm_while_a_job_runs(take_job: Receive) -> Receive:
    """Wrap a child's job receive: SIGTERM does what it did (leave) only while the child waits
    for a job, and is ignored from the job's receipt to the next receive."""
    idle_disposition: list[object] = []

    def take_next_job(*args: object, **kwargs: object) -> object:
        if not idle_disposition:  # billiard installs it after the receive is made
            idle_disposition.append(signal.getsignal(signal.SIGTERM))
        signal.signal(signal.SIGTERM, idle_disposition[0])  # the previous job's result is written
        job = take_job(*args, **kwargs)
        if job:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return job

    return take_next_job


class _JobHoldingWorker:
    """Mixed into billiard's pool child: its job receive is wrapped once it is made."""

    def _make_child_methods(self, *args: object, **kwargs: object) -> None:
        super()._make_child_methods(*args, **kwargs)
        self.wait_for_job = hold_sigterm_while_a_job_runs(self.wait_for_job)


class _AsynWorker(_JobHoldingWorker, asynpool.Worker):
    pass


class _BlockingWorker(_JobHoldingWorker, billiard_pool.Worker):
    pass


class _AsynPool(asynpool.AsynPool):
    Worker = _AsynWorker


class _BlockingPool(billiard_pool.Pool):
    Worker = _BlockingWorker


class PreforkPool(prefork.TaskPool):
    """Celery's prefork pool whose children finish the job they took on SIGTERM
    (`worker_pool`, so `-P prefork` selects it; `-P threads` is unchanged)."""

    Pool = _AsynPool
    BlockingPool = _BlockingPool


POOL_PATH = "core.pool_shutdown:PreforkPool"
