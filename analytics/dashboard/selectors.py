"""What the operations dashboard shows, as one JSON document (reads only)."""

from __future__ import annotations

import os
from typing import Any

from django.apps import apps
from django.conf import settings
from django.utils import timezone

from analytics.selectors.campaign_stats import campaigns_current
from analytics.selectors.days import platform_days
from analytics.selectors.overview import stats_overview
from callbacks.selectors import callbacks_summary
from clients.key_types import KeyType
from core.priorities import Priority
from core.worker import worker_environment
from delivery.models import EmailMessage
from delivery.selectors import ambiguous_summary


def recent_failures(*, limit: int = 15) -> list[dict[str, Any]]:
    """The last failures, by when their failing send was claimed (the newest first).

    Ordered as msg_status_claimed_idx (status, claimed_at) reads backwards: 15 index entries from
    each week. Ordered by id, the plan walked each week's primary key back until 15 FAILED rows
    turned up, every row of the week when none failed: 320 ms over the 538,000 rows sent since
    the last failure in the month of history (decision 138)."""
    rows = (
        EmailMessage.objects.filter(status=EmailMessage.Status.FAILED).exclude(key_type=KeyType.TEST)
        .order_by("-claimed_at", "-id")
        .values("id", "recipient", "provider", "error", "created_at")[:limit]
    )
    return [{**row, "created_at": row["created_at"].isoformat()} for row in rows]


def recent_dead_letters(*, limit: int = 15) -> list[dict[str, Any]] | None:
    """Dead letters if the delivery app has its DeadLetter model; None otherwise."""
    try:
        model = apps.get_model("delivery", "DeadLetter")
    except LookupError:
        return None
    rows = model.objects.order_by("-pk")[:limit]
    return [{"id": row.pk, "summary": str(row)[:300]} for row in rows]


def pools_without_task_events() -> list[str]:
    """The priorities whose pools send no task events (decision 55): by the same rule the worker
    applies to its own environment (core/worker.py), or every pool if events are off."""
    if not settings.CELERY_WORKER_SEND_TASK_EVENTS:
        return [p.label for p in Priority]
    return [p.label for p in Priority if worker_environment(p.label, dict(os.environ))]


def dashboard_data() -> dict[str, Any]:
    """The live figures: a test key's messages and campaigns (issue 27) are left out, but not
    the queue backlogs: their rows do wait in the real queues for the real pools."""
    now = timezone.now()
    return {
        **stats_overview(),
        "campaigns": campaigns_current(now=now),
        "failures": recent_failures(),
        "dead_letters": recent_dead_letters(),
        # Status callback endpoints failing now, and those disabled after failing for the retry
        # period (the operator alert: decision 113).
        "callbacks": callbacks_summary(),
        "ambiguous": ambiguous_summary(EmailMessage.objects.exclude(key_type=KeyType.TEST), now=now),
        # The pools that send no Celery task events (core/worker.py): Flower lists their workers
        # but none of their tasks, which the pool panel says.
        "pools_without_task_events": pools_without_task_events(),
        # Every service's live mail of the last closed days, from the daily facts (decision 118).
        "days": platform_days(now=now),
    }
