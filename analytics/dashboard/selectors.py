"""What the operations dashboard shows, as one JSON document (reads only)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.utils import timezone

from analytics.selectors.campaign_stats import campaigns_running
from analytics.selectors.overview import stats_overview
from delivery.models import EmailMessage
from delivery.selectors import ambiguous_summary


def recent_failures(*, limit: int = 15) -> list[dict[str, Any]]:
    rows = (
        EmailMessage.objects.filter(status=EmailMessage.Status.FAILED)
        .order_by("-id")
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


def dashboard_data() -> dict[str, Any]:
    return {
        **stats_overview(),
        "campaigns": campaigns_running(),
        "failures": recent_failures(),
        "dead_letters": recent_dead_letters(),
        "ambiguous": ambiguous_summary(EmailMessage.objects.all(), now=timezone.now()),
    }
