"""Campaign lifecycle: guarded status changes and what each one does to the message rows.

    DRAFT -> SCHEDULED -> QUEUED -> SENDING -> COMPLETED
    pause: SCHEDULED | QUEUED | SENDING -> PAUSED;  resume: PAUSED -> where it was
    cancel: any non-terminal -> CANCELLED;          fail: any non-terminal -> FAILED

Every change is one conditional UPDATE naming the states it may leave, so two operators (or an
operator and the fan-out) can never both win; a refused change raises `IllegalTransitionError`
(the API's 409). Pause and cancel take effect at once through the claim guard in
`campaigns/claim_guard.py` (workers do not claim a paused or cancelled campaign's rows); rows
already claimed but not yet handed to a provider are taken back here, and the hand-off mark
(`status = 'SENDING' AND claim_token = ...`) then skips them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from campaigns.jobs import campaign_cancel_rows_enqueue, campaign_fanout_enqueue
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_lock, campaign_unlock
from campaigns.services.scheduled import (
    campaign_has_due_rows,
    campaign_schedule_records_close,
    campaign_schedule_records_set,
)
from delivery.models import EmailMessage
from delivery.services import ledger

CS = Campaign.Status
MS = EmailMessage.Status
ACTIVE = [CS.DRAFT, CS.SCHEDULED, CS.QUEUED, CS.SENDING, CS.PAUSED]
CANCEL_CHUNK = 10_000
# A row a worker is writing is busy for one statement (milliseconds): the cancel's loop looks
# again this often, for at most this long before handing the rest to a new run of its task.
CANCEL_BUSY_PAUSE_SECONDS = 0.05
CANCEL_BUSY_SECONDS = 30.0

logger = logging.getLogger(__name__)


class IllegalTransitionError(Exception):
    def __init__(self, campaign: Campaign, action: str):
        super().__init__(f"Cannot {action} a campaign that is {campaign.status}.")
        self.campaign = campaign
        self.action = action


def _transition(campaign_id: int, action: str, allowed: list[str], **changes: object) -> Campaign:
    updated = Campaign.objects.filter(pk=campaign_id, status__in=allowed).update(**changes)
    campaign = Campaign.objects.get(pk=campaign_id)
    if not updated:
        raise IllegalTransitionError(campaign, action)
    return campaign


@transaction.atomic
def campaign_pause(*, campaign_id: int) -> Campaign:
    current = Campaign.objects.select_for_update().get(pk=campaign_id)
    # A paused SENDING campaign resumes as QUEUED: the fan-out re-runs, continues from its
    # cursor and re-publishes the rows the pause left QUEUED.
    back_to = CS.SCHEDULED if current.status == CS.SCHEDULED else CS.QUEUED
    campaign = _transition(
        campaign_id, "pause", [CS.SCHEDULED, CS.QUEUED, CS.SENDING],
        status=CS.PAUSED, resume_status=back_to,
    )
    ledger.campaign_unstarted_claims_set(campaign_id=campaign_id, status=MS.QUEUED)
    campaign_schedule_records_set(campaign_id=campaign_id, old="active", new="paused")
    return campaign


@transaction.atomic
def campaign_resume(*, campaign_id: int) -> Campaign:
    current = Campaign.objects.select_for_update().get(pk=campaign_id)
    back_to = current.resume_status or CS.QUEUED
    if back_to == CS.SCHEDULED and campaign_has_due_rows(campaign_id=campaign_id):
        # Rows fell due while paused (fenced QUEUED, skipped by the claim guard): the fan-out
        # re-publishes them and the campaign sends as usual.
        back_to = CS.QUEUED
    campaign = _transition(campaign_id, "resume", [CS.PAUSED], status=back_to, resume_status="")
    campaign_schedule_records_set(campaign_id=campaign_id, old="paused", new="active")
    if campaign.status == CS.QUEUED or not campaign.fanout_done:
        # Every unclaimed row again: the tasks published before the pause were consumed and skipped.
        transaction.on_commit(lambda: campaign_fanout_enqueue(campaign_id, republish_all=True))
    return campaign


def campaign_cancel_if_open(campaign_id: int) -> None:
    """Cancel unless it already ended: a cancelled one-off schedule's campaign
    (registered with scheduling/extensions.py)."""
    with contextlib.suppress(IllegalTransitionError):
        campaign_cancel(campaign_id=campaign_id)


@transaction.atomic
def campaign_cancel(*, campaign_id: int) -> Campaign:
    campaign = _transition(campaign_id, "cancel", ACTIVE, status=CS.CANCELLED, completed_at=timezone.now())
    ledger.campaign_unstarted_claims_set(campaign_id=campaign_id, status=MS.CANCELLED)
    # SCHEDULED rows are cancelled by campaign_rows_cancel below; their due-set entries are then
    # dropped by the dispatcher's guarded UPDATE (it moves only SCHEDULED rows).
    campaign_schedule_records_close(campaign_id=campaign_id, status="cancelled")
    transaction.on_commit(lambda: campaign_cancel_rows_enqueue(campaign_id))
    return campaign


def campaign_complete(*, campaign_id: int) -> bool:
    """SENDING -> COMPLETED once the fan-out is done and no row is waiting or in flight."""
    waiting = EmailMessage.objects.filter(
        campaign_id=campaign_id, status__in=[MS.QUEUED, MS.SENDING, MS.SCHEDULED]
    ).exists()
    if waiting:
        return False
    return bool(
        Campaign.objects.filter(pk=campaign_id, status=CS.SENDING, fanout_done=True).update(
            status=CS.COMPLETED, completed_at=timezone.now()
        )
    )


def campaign_fail(*, campaign_id: int, reason: str) -> None:
    Campaign.objects.filter(pk=campaign_id, status__in=ACTIVE).update(
        status=CS.FAILED, completed_at=timezone.now(), metadata={"failure": reason[:2000]}
    )


def campaign_lifecycle_apply(*, campaign_id: int, action: str, reason: str = "") -> Campaign:
    """Apply `action` (pause | resume | cancel) by name (the dashboard's buttons); raises
    IllegalTransitionError when the campaign's state refuses it (the API's 409), and
    Campaign.DoesNotExist for an unknown id."""
    if action not in _BY_NAME:
        raise ValueError(f"unknown campaign action {action!r}")
    campaign = _BY_NAME[action](campaign_id=campaign_id)
    if reason:
        logger.warning("campaign %s %s: %s", campaign_id, action, reason)
    return campaign


def campaign_lifecycle_change(*, campaign_id: int, action: str, reason: str = "") -> bool:
    """`campaign_lifecycle_apply` for callers to whom an illegal transition is just "no change"
    (False): the reputation guard."""
    try:
        campaign_lifecycle_apply(campaign_id=campaign_id, action=action, reason=reason)
    except IllegalTransitionError:
        return False
    return True


def campaign_pause_for(campaign_id: int, reason: str) -> None:
    """The reputation guard's pause (registered with feedback.extensions in CampaignsConfig)."""
    campaign_lifecycle_change(campaign_id=campaign_id, action="pause", reason=reason)


def campaign_rows_cancel(*, campaign_id: int) -> int:
    """Mark every unsent row CANCELLED, in chunks so no statement locks a million rows.

    A chunk skips the rows a worker is writing at that moment (never waiting on them, so it
    cannot deadlock with the worker): while any row is still unsent, the loop asks again after
    a short pause. Past `CANCEL_BUSY_SECONDS` it leaves the rest to a new run of its task."""
    total = 0
    deadline = time.monotonic() + CANCEL_BUSY_SECONDS
    # Wait for a running fan-out to notice the cancel and stop (it checks every chunk),
    # so no chunk it writes afterwards is left QUEUED.
    campaign_lock(campaign_id, wait=True)
    try:
        while True:
            changed = ledger.campaign_unsent_cancel(campaign_id=campaign_id, limit=CANCEL_CHUNK)
            total += changed
            # Not "fewer than a chunk": rows handed over meanwhile drop out of a chunk, and rows
            # past it may still be unsent.
            if changed:
                continue
            if not ledger.campaign_has_unsent(campaign_id=campaign_id):
                return total
            if time.monotonic() >= deadline:
                logger.warning("campaign %s: rows still busy after %.1f s; cancelling them later",
                               campaign_id, CANCEL_BUSY_SECONDS)
                campaign_cancel_rows_enqueue(campaign_id, countdown=CANCEL_BUSY_SECONDS)
                return total
            time.sleep(CANCEL_BUSY_PAUSE_SECONDS)
    finally:
        campaign_unlock(campaign_id)


_BY_NAME: dict[str, Callable[..., Campaign]] = {
    "pause": campaign_pause,
    "resume": campaign_resume,
    "cancel": campaign_cancel,
}
LIFECYCLE_ACTIONS = tuple(_BY_NAME)
