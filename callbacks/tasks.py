"""Celery tasks of the callbacks app, on their own queue and pool (`callbacks`): a slow or dead
receiver holds one of that pool's threads, never an email's worker."""

from __future__ import annotations

from celery import shared_task

from callbacks.services.deliver import endpoint_deliver
from callbacks.services.dispatch import DELIVER_TASK, deliver_publish


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver_endpoint(endpoint_id: int) -> dict:
    """Deliver what is pending; publish itself again when its time budget ran out first."""
    report = endpoint_deliver(endpoint_id)
    if report.more:
        deliver_publish(endpoint_id)
    return {"posts": report.posts, "delivered": report.delivered, "failed": report.failed,
            "disabled": report.disabled, "busy": report.busy}
