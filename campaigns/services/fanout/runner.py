"""Running a campaign's fan-out: start it, re-publish what a crash or pause left, write its
ranges chunk by chunk (one thread and connection each), finish it."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from threading import Event

from django.db import connection, transaction
from django.utils import timezone

from campaigns.audience import CAMPAIGN_TABLE, audience_count, inline_contacts_upsert
from campaigns.campaign_schedule import campaign_schedule_compiled
from campaigns.jobs import campaign_progress_check_later
from campaigns.models import Campaign
from campaigns.schedule_sql import schedule_sql
from campaigns.services.fanout.lock import campaign_lock, campaign_unlock
from campaigns.services.fanout.publisher import Publisher
from campaigns.services.fanout.ranges import NO_UPPER, Range, ranges_record
from campaigns.services.fanout.report import FanoutReport
from campaigns.services.fanout.republish import campaign_unclaimed_republish
from campaigns.services.fanout.statements import MESSAGE_TABLE, chunk_runner, range_cursor_advance
from campaigns.services.fanout_marks import fanout_published_marks
from campaigns.services.scheduled import campaign_schedule_record_update, campaign_scheduled_restore
from scheduling.services import due

logger = logging.getLogger(__name__)


def campaign_fanout(*, campaign_id: int, republish_all: bool = False) -> FanoutReport:
    """Run (or continue) a campaign's fan-out; returns what this run did. A continuing fan-out
    first re-publishes the QUEUED rows its publishing had not reached, or with `republish_all`
    (a resume: the paused campaign's tasks were consumed and skipped) every unclaimed one."""
    report = FanoutReport()
    if not campaign_lock(campaign_id, wait=False):
        logger.info("fan-out of campaign %s already running elsewhere", campaign_id)
        return report
    try:
        return _fanout_locked(campaign_id, report, republish_all)
    finally:
        campaign_unlock(campaign_id)


def _start(campaign_id: int) -> Campaign | None:
    """QUEUED -> SENDING (or stay SENDING on a restart); None when paused, cancelled or done.

    A SCHEDULED campaign stays SCHEDULED: its rows are written SCHEDULED and the scheduler's
    dispatch moves it to SENDING when its first row falls due.
    """
    cs = Campaign.Status
    updated = Campaign.objects.filter(pk=campaign_id, status__in=[cs.QUEUED, cs.SENDING]).update(
        status=cs.SENDING
    ) or Campaign.objects.filter(pk=campaign_id, status=cs.SCHEDULED).exists()
    if not updated:
        return None
    campaign = Campaign.objects.get(pk=campaign_id)
    if campaign.status == cs.SCHEDULED:
        return campaign
    if campaign.started_at is None:
        Campaign.objects.filter(pk=campaign_id, started_at__isnull=True).update(started_at=timezone.now())
    return campaign


def _fanout_locked(campaign_id: int, report: FanoutReport, republish_all: bool) -> FanoutReport:
    campaign = _start(campaign_id)
    if campaign is None:
        return report
    if campaign.fanout_cursor or campaign.fanout_done:
        published = {} if republish_all else fanout_published_marks(campaign.id)
        report.republished, report.tasks = campaign_unclaimed_republish(
            campaign=campaign, published=published)
        logger.info("fan-out of campaign %s continues: %d unclaimed rows published again (%s)",
                    campaign.id, report.republished, "past the publish marks" if published else "all")
        campaign_scheduled_restore(campaign_id=campaign.id)
    if campaign.fanout_done:
        _finish(campaign.id)  # restarts the completion checks that a pause stopped
        report.finished = True
        return report
    if campaign.audience.get("type") == "inline" and not campaign.fanout_cursor:
        inline_contacts_upsert(campaign_id=campaign.id)
    if campaign.audience_size is None:
        _audience_size_record(campaign)
    campaign_schedule_compiled(campaign=campaign, now=campaign.created_at)
    if not campaign.fanout_ranges and not campaign.fanout_cursor:
        campaign.fanout_ranges = ranges_record(campaign)
    if campaign.fanout_ranges:
        return _ranges_write(campaign, report)
    with Publisher(campaign, None, report) as publisher:
        whole = Range(index=None, cursor=campaign.fanout_cursor, upper=NO_UPPER)
        finished = _range_write(campaign, whole, report, publisher, Event())
    if finished:
        _finish_recorded(campaign.id, report)
    return report


def _ranges_write(campaign: Campaign, report: FanoutReport) -> FanoutReport:
    """Write every range at once, one thread and connection each; finish when all are done."""
    stop = Event()  # a pause, cancel or error in one range stops the others after their chunk
    ranges = [Range(index=i, cursor=cursor, upper=upper)
              for i, (cursor, upper) in enumerate(campaign.fanout_ranges)]
    parts = [FanoutReport() for _ in ranges]
    with ThreadPoolExecutor(max_workers=len(ranges), thread_name_prefix="fanout-range") as pool:
        futures = [pool.submit(_range_in_thread, campaign, rng, part, stop)
                   for rng, part in zip(ranges, parts, strict=True)]
    for part in parts:
        report.add(part)
    exhausted = [future.result() for future in futures]  # re-raises a range's error
    if all(exhausted):
        _finish_recorded(campaign.id, report)
    return report


def _range_in_thread(campaign: Campaign, rng: Range, part: FanoutReport, stop: Event) -> bool:
    try:
        with Publisher(campaign, rng.index, part) as publisher:
            return _range_write(campaign, rng, part, publisher, stop)
    except BaseException:
        stop.set()
        raise
    finally:
        connection.close()  # this thread's own connection


def _finish_recorded(campaign_id: int, report: FanoutReport) -> None:
    with transaction.atomic():
        _finish(campaign_id)
    report.finished = True


def _range_write(
    campaign: Campaign, rng: Range, report: FanoutReport, publisher: Publisher, stop: Event
) -> bool:
    """Write one range chunk by chunk; True when it is exhausted, False when stopped."""
    publishes = schedule_sql(campaign.schedule).publishes
    run_chunk = chunk_runner(campaign)
    cursor_id = rng.cursor
    while not stop.is_set():
        with transaction.atomic():
            last_id, scanned, eligible, queued_ids, *rest = run_chunk(cursor_id, rng.upper)
            if not scanned:
                return True
            cursor_id = last_id
            still_sending = range_cursor_advance(campaign.id, rng.index, cursor_id, scanned - eligible)
        report.inserted += len(queued_ids)
        report.excluded += scanned - eligible
        if rest and rest[0]:
            # Committed SCHEDULED rows (the record) into the due set; if Redis fails here the
            # scheduler's overdue sweep, a restarted fan-out or rebuild_schedule adds them.
            due.messages_schedule(items=[(int(pk), datetime.fromtimestamp(at, tz=UTC)) for pk, at in rest[0]])
        if not still_sending:
            stop.set()
            return False  # paused or cancelled: resume re-publishes what was written
        if queued_ids and publishes:
            publisher.publish(queued_ids, cursor_id)
    return False


def _audience_size_record(campaign: Campaign) -> None:
    """The denominator of the campaign's progress, before its first chunk is written."""
    campaign.audience_size = audience_count(campaign.audience, campaign_id=campaign.id)
    Campaign.objects.filter(pk=campaign.id).update(audience_size=campaign.audience_size)


def _finish(campaign_id: int) -> None:
    # The first finish makes audience_size exact: contacts that joined or left the audience
    # while the fan-out ran moved it away from the count taken at the start.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CAMPAIGN_TABLE} SET fanout_done = TRUE, audience_size = excluded_count + "
            f"(SELECT count(*) FROM {MESSAGE_TABLE} WHERE campaign_id = %s) "
            "WHERE id = %s AND NOT fanout_done",
            [campaign_id, campaign_id],
        )
    campaign_schedule_record_update(campaign_id=campaign_id)
    transaction.on_commit(lambda: campaign_progress_check_later(campaign_id))
