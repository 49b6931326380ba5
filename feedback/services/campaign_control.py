"""Pause, resume and cancel a campaign: the campaigns app's lifecycle services when present.

The campaigns engineer owns the lifecycle (campaigns/services: pause also stops the fan-out
and the queued sends). Until those are merged this module falls back to one guarded status
change, so the reputation guard and the dashboard buttons already work end to end.
"""

from __future__ import annotations

import logging

from campaigns.models import Campaign

logger = logging.getLogger(__name__)
Status = Campaign.Status

_ALLOWED_FROM = {
    "pause": (Status.SENDING, Status.QUEUED, Status.SCHEDULED),
    "resume": (Status.PAUSED,),
    "cancel": (Status.DRAFT, Status.SCHEDULED, Status.QUEUED, Status.SENDING, Status.PAUSED),
}
_TARGET = {"pause": Status.PAUSED, "resume": Status.SENDING, "cancel": Status.CANCELLED}
ACTIONS = tuple(_TARGET)


def campaign_lifecycle_change(*, campaign_id: int, action: str, reason: str = "") -> bool:
    """Apply `action` (pause | resume | cancel); returns whether the campaign changed."""
    if action not in _TARGET:
        raise ValueError(f"unknown campaign action {action!r}")
    service = _campaigns_service(action)
    if service is not None:
        service(campaign_id=campaign_id)
        return True
    changed = Campaign.objects.filter(id=campaign_id, status__in=_ALLOWED_FROM[action]).update(
        status=_TARGET[action]
    )
    if changed and reason:
        logger.warning("campaign %s %s: %s", campaign_id, _TARGET[action], reason)
    return bool(changed)


def _campaigns_service(action: str):
    try:
        from campaigns import services  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(services, f"campaign_{action}", None)
