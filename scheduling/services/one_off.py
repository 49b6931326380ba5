"""Record a one-off campaign schedule (scheduled / local_time / optimal) so the schedules API
lists it with its pending count, and DELETE /api/v1/schedules/{id} cancels its waiting rows.

Called by campaigns.services.launch in the transaction that creates the campaign; the fan-out
later sets `scheduled_at` to the earliest due row (campaigns.services.scheduled).
"""

from __future__ import annotations

from datetime import datetime

from clients.key_types import KeyType
from scheduling import timing
from scheduling.models import Schedule


def schedule_record_campaign(
    *, client_id: int | None, campaign_id: int, name: str, type: str, scheduled_at: datetime | None,
    timezone: str = "UTC", definition: dict | None = None, key_type: str = KeyType.LIVE,
) -> Schedule:
    """The record of a one-off campaign schedule, of the campaign's key type."""
    if type not in {Schedule.Type.SCHEDULED, Schedule.Type.LOCAL_TIME, Schedule.Type.OPTIMAL}:
        raise timing.TimingError("type", f"Not a one-off schedule type: {type!r}.")
    timing.zone(timezone)
    return Schedule.objects.create(
        client_id=client_id, campaign_id=campaign_id, name=name, type=type, timezone=timezone,
        scheduled_at=scheduled_at, next_run=scheduled_at, definition=definition or {}, key_type=key_type,
    )
