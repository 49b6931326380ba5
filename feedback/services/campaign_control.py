"""Pause, resume and cancel a campaign from the feedback side (reputation guard, dashboard).

A thin adapter over the campaigns app's lifecycle services, which also stop the fan-out and
release or cancel claimed rows; an illegal transition is reported as "no change".
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from campaigns.models import Campaign
from campaigns.services.lifecycle import (
    IllegalTransitionError,
    campaign_cancel,
    campaign_pause,
    campaign_resume,
)

logger = logging.getLogger(__name__)

_SERVICES: dict[str, Callable[..., Campaign]] = {
    "pause": campaign_pause,
    "resume": campaign_resume,
    "cancel": campaign_cancel,
}
ACTIONS = tuple(_SERVICES)


def campaign_lifecycle_change(*, campaign_id: int, action: str, reason: str = "") -> bool:
    """Apply `action` (pause | resume | cancel); returns whether the campaign changed."""
    if action not in _SERVICES:
        raise ValueError(f"unknown campaign action {action!r}")
    try:
        _SERVICES[action](campaign_id=campaign_id)
    except IllegalTransitionError:
        return False
    if reason:
        logger.warning("campaign %s %s: %s", campaign_id, action, reason)
    return True
