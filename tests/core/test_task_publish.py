"""core.task_publish: services start tasks by name; a name nobody registered is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from celery import current_app

from core.task_publish import UnknownTaskError, task_publish, tasks_publish

ROOT = Path(__file__).resolve().parents[2]


def _published_names() -> set[str]:
    sources = (path.read_text() for path in ROOT.glob("*/**/*.py")
               if not {"tests", "testkit", "bench", ".venv"} & set(path.relative_to(ROOT).parts))
    return {name for text in sources for name in re.findall(r'tasks?_publish\(\s*"([^"]+)"', text)}


def test_an_unknown_task_name_is_refused_before_anything_is_sent():
    with pytest.raises(UnknownTaskError, match=r"campaigns\.fanuot"):
        task_publish("campaigns.fanuot", args=(1,), queue="ops")


def test_every_name_the_code_publishes_is_a_registered_task():
    names = _published_names()
    assert {"delivery.send_batch", "campaigns.fanout", "feedback.process_webhook_delivery"} <= names
    current_app.loader.import_default_modules()
    assert names - set(current_app.tasks) == set()


def test_many_tasks_go_in_one_round_trip_and_are_consumed_in_publish_order():
    """Decision 64: the direct Redis path writes a batch of tasks with one LPUSH; Celery's own
    consumer (kombu) reads them back as the tasks published, first published first."""
    queue = "test-publish-order"
    batches = [([i * 10 + k for k in range(3)], 2, 0) for i in range(5)]
    with current_app.connection_for_read() as conn:
        simple = conn.SimpleQueue(queue)
        try:
            assert tasks_publish("delivery.send_batch", args_list=batches, queue=queue) == 5
            received = []
            for _ in batches:
                message = simple.get(timeout=5)
                received.append((message.headers["task"], message.payload[0]))
                message.ack()
            assert received == [("delivery.send_batch", list(args)) for args in batches]
        finally:
            simple.queue.purge()
            simple.close()
