"""Reads of the callbacks app for operators: the dashboard's panel."""

from __future__ import annotations

from typing import Any

from callbacks.models import WebhookEndpoint

SHOWN = 10


def _rows(endpoints: Any, since_field: str) -> list[dict[str, Any]]:
    return [{"id": e.pk, "service": e.service_id, "url": e.url,
             "since": getattr(e, since_field).isoformat() if getattr(e, since_field) else None,
             "failed_attempts": e.failed_attempts}
            for e in endpoints[:SHOWN]]


def callbacks_summary() -> dict[str, Any]:
    """Endpoints disabled because they kept failing, and those failing now (newest first)."""
    disabled = WebhookEndpoint.objects.filter(
        enabled=False, disabled_reason=WebhookEndpoint.DisabledReason.FAILING).order_by("-disabled_at")
    failing = WebhookEndpoint.objects.filter(enabled=True, failing_since__isnull=False)
    failing = failing.order_by("failing_since")
    return {"endpoints": WebhookEndpoint.objects.count(),
            "disabled_count": disabled.count(), "disabled": _rows(disabled, "disabled_at"),
            "failing_count": failing.count(), "failing": _rows(failing, "failing_since")}
