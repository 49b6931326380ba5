"""Start campaigns' background jobs (the tasks in campaigns/tasks.py), by task name.

They run on the maintenance queue (the ops worker), never on a send queue, so a fan-out never
holds a send worker. Services call these after their transaction commits.
"""

from __future__ import annotations

from core.priorities import MAINTENANCE_QUEUE
from core.task_publish import task_publish

PROGRESS_CHECK_SECONDS = 2.0  # far below the broker visibility timeout (celery#2599)


def campaign_fanout_enqueue(campaign_id: int, *, republish_all: bool = False) -> None:
    """Start or continue a fan-out; `republish_all` after a pause (campaigns.services.fanout)."""
    # One argument unless asked: a worker still on the one-argument task takes it during a deploy.
    args = (campaign_id, True) if republish_all else (campaign_id,)
    task_publish("campaigns.fanout", args=args, queue=MAINTENANCE_QUEUE)


def campaign_cancel_rows_enqueue(campaign_id: int, *, countdown: float | None = None) -> None:
    task_publish("campaigns.cancel_rows", args=(campaign_id,), queue=MAINTENANCE_QUEUE,
                 countdown=countdown)


def campaign_progress_check_later(campaign_id: int) -> None:
    task_publish("campaigns.progress_check", args=(campaign_id,), queue=MAINTENANCE_QUEUE,
                 countdown=PROGRESS_CHECK_SECONDS)
