"""Celery tasks of the campaigns app: thin wrappers that take a campaign id and call one service.

They run on the maintenance queue (the ops worker), never on a send queue, so a fan-out never
holds a send worker. `*_enqueue` helpers are what services call after their transaction commits.
"""

from __future__ import annotations

import logging

from celery import shared_task

from core.priorities import MAINTENANCE_QUEUE

logger = logging.getLogger(__name__)
PROGRESS_CHECK_SECONDS = 2.0  # far below the broker visibility timeout (celery#2599)


@shared_task(name="campaigns.fanout", ignore_result=True)
def campaign_fanout_task(campaign_id: int) -> dict:
    from campaigns.services.fanout import campaign_fanout
    from campaigns.services.lifecycle import campaign_fail

    try:
        report = campaign_fanout(campaign_id=campaign_id)
    except Exception as exc:
        logger.exception("fan-out of campaign %s failed", campaign_id)
        campaign_fail(campaign_id=campaign_id, reason=f"fan-out failed: {exc}")
        raise
    return {"inserted": report.inserted, "excluded": report.excluded, "tasks": report.tasks}


@shared_task(name="campaigns.cancel_rows", ignore_result=True)
def campaign_cancel_rows_task(campaign_id: int) -> int:
    from campaigns.services.lifecycle import campaign_rows_cancel

    return campaign_rows_cancel(campaign_id=campaign_id)


@shared_task(name="campaigns.progress_check", ignore_result=True)
def campaign_progress_check_task(campaign_id: int) -> None:
    """Complete a campaign once nothing is left; checks again shortly while it is sending."""
    from campaigns.models import Campaign
    from campaigns.services.lifecycle import campaign_complete
    from campaigns.services.progress import campaign_stalled_republish

    if campaign_complete(campaign_id=campaign_id):
        return
    if Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.SENDING).exists():
        republished = campaign_stalled_republish(campaign_id=campaign_id)
        if republished:
            logger.warning("campaign %s stalled; re-published %d rows", campaign_id, republished)
        campaign_progress_check_later(campaign_id)


def campaign_fanout_enqueue(campaign_id: int) -> None:
    campaign_fanout_task.apply_async(args=(campaign_id,), queue=MAINTENANCE_QUEUE)


def campaign_cancel_rows_enqueue(campaign_id: int) -> None:
    campaign_cancel_rows_task.apply_async(args=(campaign_id,), queue=MAINTENANCE_QUEUE)


def campaign_progress_check_later(campaign_id: int) -> None:
    campaign_progress_check_task.apply_async(
        args=(campaign_id,), queue=MAINTENANCE_QUEUE, countdown=PROGRESS_CHECK_SECONDS
    )
