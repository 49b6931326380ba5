"""Read the Celery messages a Redis broker holds, as kombu's Redis transport stores them.

A queue is a list of JSON envelopes; a message a consumer took but has not acknowledged sits in
the `unacked` hash (tag -> [envelope, exchange, routing key]) with its delivery time in the
`unacked_index` sorted set, until it is acked or, past the visibility timeout, put back on its
queue. The fault tests read them to see what the broker really holds (F3, F4, F14), and the
workers' "received" lines (NOTIFIER_LOG_EACH_TASK=true) to see what really ran.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

import redis
from django.conf import settings

from core.priorities import ALL_QUEUES, SEND_QUEUES
from core.redis_client import broker_redis

UNACKED_KEYS = ("unacked", "unacked_index", "unacked_mutex")
RECEIVED = re.compile(r"Task delivery\.send_batch\[([0-9a-f-]+)\] received")
FINISHED = re.compile(r"Task delivery\.send_batch\[([0-9a-f-]+)\] (?:succeeded in|raised|retry)")


@dataclass(frozen=True)
class BrokerMessage:
    where: str  # the queue's name, or "unacked"
    task_id: str
    task: str
    args: list
    eta: datetime | None


def broker_client() -> redis.Redis:
    """The Redis the tests' Celery broker runs on (this session's database)."""
    client = broker_redis(settings.CELERY_BROKER_URL)
    assert client is not None, "these tests read a Redis broker"
    return client


def unacked_forget() -> None:
    """Drop what another test's killed worker left unacknowledged: a short visibility timeout
    would put it back on a queue in the middle of this test."""
    broker_client().delete(*UNACKED_KEYS)


def _decoded(where: str, envelope: dict) -> BrokerMessage:
    headers = envelope["headers"]
    args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
    eta = datetime.fromisoformat(headers["eta"]) if headers.get("eta") else None
    return BrokerMessage(where, headers["id"], headers["task"], args, eta)


def broker_messages(queues: Iterable[str] = ALL_QUEUES) -> Iterator[BrokerMessage]:
    """Every message waiting on `queues` (all priority steps of each) and every unacked one."""
    client = broker_client()
    for queue in queues:
        for key in client.scan_iter(match=f"{queue}*"):
            if client.type(key) == b"list":
                for raw in client.lrange(key, 0, -1):
                    yield _decoded(queue, json.loads(raw))
    for raw in client.hvals("unacked"):
        envelope, _exchange, _routing_key = json.loads(raw)
        yield _decoded("unacked", envelope)


def send_tasks_waiting(queue: str) -> dict[str, list[int]]:
    """{task id: message ids} of the send tasks waiting on `queue` (read before any worker runs)."""
    return {m.task_id: m.args[0] for m in broker_messages([queue]) if m.where == queue}


def tasks_received(logs: Iterable[str]) -> Counter:
    """How many times each send task was received by a worker, over these worker logs."""
    return _count(RECEIVED, logs)


def send_tasks_all_done(logs: list[str]) -> bool:
    """Every copy of every send task these workers received has ended, and the broker holds no
    other: counting deliveries before then would miss a late copy's send."""
    if tasks_received(logs) != _count(FINISHED, logs):
        return False
    return not any(broker_messages(SEND_QUEUES))


def _count(pattern: re.Pattern, logs: Iterable[str]) -> Counter:
    counts: Counter = Counter()
    for log in logs:
        counts.update(pattern.findall(log))
    return counts
