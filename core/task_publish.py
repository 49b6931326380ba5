"""Publish a Celery task by its registered name, so a service never imports its app's tasks.

An app's `tasks.py` imports the services it wraps; a service that must start a task (after
its transaction commits) would import `tasks.py` back, an import cycle that used to be dodged
with imports inside function bodies. Services publish by name here instead: the names are the
`name=` of each `@shared_task`, and an unknown name is refused before anything is sent.

On a Redis broker a task due now is written straight to its queue (decision 52): the message
Celery's `send_task` would write (protocol 2, JSON, one LPUSH), without its per-message
machinery (~0.45 ms of CPU: producer pool, option merging, reprs, kombu's publish wrappers) and
without a `task-sent` event (workers still report received/started/succeeded). A countdown,
another broker, or arguments that are not plain JSON go through `send_task`.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import uuid
from collections.abc import Sequence
from functools import cache
from threading import Lock

import redis
from celery import current_app

from core.redis_client import broker_redis

# The last element of a protocol 2 body: no callbacks, errbacks, chain or chord.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
# Two threads publishing their first task at once (the parallel fan-out's publishers) would both
# import the tasks modules: the second saw a half-imported module and no task of the name.
_IMPORT_LOCK = Lock()
ARGSREPR_MAX = 1024  # Celery's own limit for the saferepr it would build


class UnknownTaskError(LookupError):
    """No installed app registered a task of this name."""


def task_publish(name: str, *, args: Sequence[object], queue: str, countdown: float | None = None) -> None:
    """Send `name(*args)` to `queue`, after `countdown` seconds when given."""
    tasks_publish(name, args_list=[args], queue=queue, countdown=countdown)


def tasks_publish(
    name: str, *, args_list: Sequence[Sequence[object]], queue: str, countdown: float | None = None
) -> int:
    """Send `name(*args)` to `queue` for every `args` of `args_list`, in order; returns how many.

    On the direct Redis path all their messages go in one LPUSH (one round trip instead of one
    per task, ~85 us each: decision 64); the list keeps their order, so the first published is
    the first consumed, as with one LPUSH each.
    """
    _task_known(name)
    broker = _redis_broker(current_app.conf.broker_url)
    if broker is not None and not countdown:
        messages = [_message(name, args, queue) for args in args_list]
        if all(message is not None for message in messages):
            if messages:
                broker.lpush(queue, *messages)
            return len(messages)
    for args in args_list:
        args = tuple(args)
        # argsrepr (what Flower and the logs show) from the C repr: Celery's default, saferepr,
        # walks a 100-id batch in Python, ~0.5 ms per task, 5 s of a 1M-recipient fan-out.
        current_app.send_task(name, args=args, queue=queue, countdown=countdown or None,
                              argsrepr=repr(args)[:ARGSREPR_MAX], kwargsrepr="{}")
    return len(args_list)


def _task_known(name: str) -> None:
    """Refuse a name no installed app registered, before anything is sent."""
    if name not in current_app.tasks:
        # A web or test process has not imported the apps' tasks modules yet (workers do at
        # start): autodiscovery imports them once, then the name must be known.
        with _IMPORT_LOCK:
            if name not in current_app.tasks:
                current_app.loader.import_default_modules()
    if name not in current_app.tasks:
        raise UnknownTaskError(f"no Celery task named {name!r} is registered")


def _redis_broker(broker_url: str) -> redis.Redis | None:
    """A client of the broker if it is Redis with kombu's plain key layout, else None."""
    options = current_app.conf.broker_transport_options or {}
    if options.get("global_keyprefix") or options.get("priority_steps"):
        return None
    return broker_redis(broker_url)


def _message(name: str, args: Sequence[object], queue: str) -> str | None:
    """The kombu Redis envelope of a Celery protocol 2 message (as `send_task` writes it for a
    task due now, priority 0, default exchange), or None if `args` is not plain JSON."""
    try:
        body = json.dumps([list(args), {}, _EMBED])
    except TypeError:
        return None
    task_id = str(uuid.uuid4())
    headers = {
        "lang": "py", "task": name, "id": task_id, "shadow": None, "eta": None, "expires": None,
        "group": None, "group_index": None, "retries": 0, "timelimit": [None, None],
        "root_id": task_id, "parent_id": None, "argsrepr": repr(tuple(args)), "kwargsrepr": "{}",
        "origin": _origin(), "ignore_result": None, "replaced_task_nesting": 0,
        "stamped_headers": None, "stamps": {},
    }
    properties = {
        "correlation_id": task_id, "reply_to": current_app.thread_oid, "delivery_mode": 2,
        "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0,
        "body_encoding": "base64", "delivery_tag": str(uuid.uuid4()),
    }
    return json.dumps({"body": base64.b64encode(body.encode()).decode(), "content-encoding": "utf-8",
                       "content-type": "application/json", "headers": headers,
                       "properties": properties})


def _origin() -> str:
    """Celery's `origin` header: gen<pid>@<host> (the pid changes across a fork)."""
    return _origin_of(os.getpid())


@cache
def _origin_of(pid: int) -> str:
    return f"gen{pid}@{socket.gethostname()}"
