"""Celery tasks of the campaigns app: thin wrappers that take a campaign id and call one service.

Services start them by name through campaigns/jobs.py (on the maintenance queue).
"""

from __future__ import annotations

import logging

from celery import shared_task
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from campaigns.jobs import campaign_progress_check_later
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from campaigns.services.lifecycle import campaign_complete, campaign_fail, campaign_rows_cancel
from campaigns.services.progress import campaign_stalled_republish
from core.db_outage import database_unavailable

logger = logging.getLogger(__name__)
# A Redis or broker connection lost mid-fan-out (a restart, F7): the fan-out is resumed, the
# campaign never FAILED for it (a 1M run's Redis restart at 120 s once failed one at 650k rows).
SERVICE_OUTAGES = (RedisConnectionError, RedisTimeoutError, KombuOperationalError)


@shared_task(name="campaigns.fanout", ignore_result=True)
def campaign_fanout_task(campaign_id: int, republish_all: bool = False) -> dict:
    try:
        report = campaign_fanout(campaign_id=campaign_id, republish_all=republish_all)
    except Exception as exc:
        if database_unavailable(exc) or isinstance(exc, SERVICE_OUTAGES):
            # Not the campaign's fault: the task runs again (a database outage), or the campaign
            # sweep publishes the fan-out again once it sees no progress (Redis or the broker
            # restarting); either way it resumes from its cursor.
            logger.warning("fan-out of campaign %s interrupted: %s", campaign_id, exc)
            raise
        logger.exception("fan-out of campaign %s failed", campaign_id)
        campaign_fail(campaign_id=campaign_id, reason=f"fan-out failed: {exc}")
        raise
    return {"inserted": report.inserted, "excluded": report.excluded, "tasks": report.tasks}


@shared_task(name="campaigns.cancel_rows", ignore_result=True)
def campaign_cancel_rows_task(campaign_id: int) -> int:
    return campaign_rows_cancel(campaign_id=campaign_id)


@shared_task(name="campaigns.progress_check", ignore_result=True)
def campaign_progress_check_task(campaign_id: int) -> None:
    """Complete a campaign once nothing is left; checks again shortly while it is sending."""
    if campaign_complete(campaign_id=campaign_id):
        return
    if Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.SENDING).exists():
        republished = campaign_stalled_republish(campaign_id=campaign_id)
        if republished:
            logger.warning("campaign %s stalled; re-published %d rows", campaign_id, republished)
        campaign_progress_check_later(campaign_id)
