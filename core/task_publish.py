"""Publish a Celery task by its registered name, so a service never imports its app's tasks.

An app's `tasks.py` imports the services it wraps; a service that must start a task (after
its transaction commits) would import `tasks.py` back, an import cycle that used to be dodged
with imports inside function bodies. Services publish by name here instead: the names are the
`name=` of each `@shared_task`, and an unknown name is refused before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from threading import Lock

from celery import current_app

# Two threads publishing their first task at once (the parallel fan-out's publishers) would both
# import the tasks modules: the second saw a half-imported module and no task of the name.
_IMPORT_LOCK = Lock()
ARGSREPR_MAX = 1024  # Celery's own limit for the saferepr it would build


class UnknownTaskError(LookupError):
    """No installed app registered a task of this name."""


def task_publish(name: str, *, args: Sequence[object], queue: str, countdown: float | None = None) -> None:
    """Send `name(*args)` to `queue`, after `countdown` seconds when given."""
    if name not in current_app.tasks:
        # A web or test process has not imported the apps' tasks modules yet (workers do at
        # start): autodiscovery imports them once, then the name must be known.
        with _IMPORT_LOCK:
            if name not in current_app.tasks:
                current_app.loader.import_default_modules()
    if name not in current_app.tasks:
        raise UnknownTaskError(f"no Celery task named {name!r} is registered")
    args = tuple(args)
    # argsrepr (what Flower and the logs show) from the C repr: Celery's default, saferepr,
    # walks a 100-id batch in Python, ~0.5 ms per task, 5 s of a 1M-recipient fan-out.
    current_app.send_task(name, args=args, queue=queue, countdown=countdown or None,
                          argsrepr=repr(args)[:ARGSREPR_MAX], kwargsrepr="{}")
