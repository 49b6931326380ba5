"""Campaign-level schedules on POST /api/v1/notifications/email: validation, the due times the
fan-out writes (time injected), the due set, schedule records, recurring runs, cancel and pause,
and the sweep that re-publishes a lost fan-out. Real PostgreSQL and Redis, in process; the
end-to-end runs with real processes are in test_campaign_schedule_e2e.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from audience.models import Contact, Segment
from campaigns.campaign_schedule import campaign_schedule_compiled
from campaigns.models import Campaign
from campaigns.services import lifecycle
from campaigns.services.fanout import campaign_fanout
from campaigns.services.launch import campaign_launch
from campaigns.services.recovery import campaigns_lost_fanout_republish
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from delivery.services.ledger import messages_claim
from scheduling import timing
from scheduling.models import Schedule
from scheduling.services import due
from scheduling.services.dispatcher import due_batch_dispatch
from scheduling.tasks import run_recurring
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_due_set")]
MS = EmailMessage.Status
CS = Campaign.Status
ZONES = {"ny": "America/New_York", "berlin": "Europe/Berlin", "ktm": "Asia/Kathmandu",
         "adelaide": "Australia/Adelaide", "tokyo": "Asia/Tokyo", "none": ""}


@pytest.fixture
def template(db):
    return factories.template_version(subject="Hi {{ name }}", html_body="<p>Hi {{ name }}</p>")


@pytest.fixture
def segment(db) -> Segment:
    for name, tz in ZONES.items():
        Contact.objects.create(client=factories.owner(), email=f"{name}@example.com", timezone=tz,
                               attributes={"g": "zones"})
    return Segment.objects.create(client=factories.owner(), name="zones", definition={
        "conditions": [{"attribute": "g", "op": "equals", "value": "zones"}]})


def _post(api, template, segment, schedule: dict, **extra):
    body = {"template_id": template.template_id, "priority": "normal", "schedule": schedule,
            "recipients": {"type": "segment", "segment_id": segment.pk}, **extra}
    return api.post("/api/v1/notifications/email", body, format="json")


def _fan_out(campaign_id: int, now: datetime) -> Campaign:
    campaign = Campaign.objects.get(pk=campaign_id)
    campaign_schedule_compiled(campaign=campaign, now=now)  # the injected clock
    campaign_fanout(campaign_id=campaign_id)
    return Campaign.objects.get(pk=campaign_id)


def _due_by_name(campaign_id: int) -> dict[str, datetime]:
    rows = EmailMessage.objects.filter(campaign_id=campaign_id)
    assert set(rows.values_list("status", flat=True)) == {MS.SCHEDULED}
    return {r.split("@")[0]: at for r, at in rows.values_list("recipient", "scheduled_for")}


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_scheduled_campaign_waits_in_the_due_set_and_is_listed_with_its_pending_count(
    api, template, segment
):
    send_at = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    in_tokyo = send_at.astimezone(timing.zone("Asia/Tokyo")).isoformat()
    response = _post(api, template, segment, {"type": "scheduled", "send_at": in_tokyo})
    assert response.status_code == 202, response.json()
    assert response.json()["status"] == "SCHEDULED"
    campaign = _fan_out(response.json()["campaign_id"], timezone.now())
    assert campaign.status == CS.SCHEDULED and campaign.fanout_done and campaign.started_at is None
    assert set(_due_by_name(campaign.pk).values()) == {send_at}
    ids = EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True)
    scores = {get_redis().zscore(due.due_key(), str(pk)) for pk in ids}
    assert scores == {send_at.timestamp()}  # every row in the due set, scored at its time
    listed = api.get("/api/v1/schedules").json()["schedules"]
    assert [(s["campaign_id"], s["type"], s["pending_count"]) for s in listed] == [
        (campaign.pk, "scheduled", len(ZONES))]
    assert datetime.fromisoformat(listed[0]["scheduled_at"]) == send_at
    # Not due yet: the scheduler dispatches nothing.
    assert due_batch_dispatch(now=timezone.now().timestamp()).dispatched == 0


def test_local_time_per_recipient_timezone_across_a_spring_forward(api, template, segment):
    # 02:30 on 14 March 2027 does not exist in New York (shifted forward: read with EST).
    response = _post(api, template, segment, {"type": "local_time", "local_time": "02:30",
                                              "date": "2027-03-14", "timezone": "Europe/Lisbon"})
    assert response.status_code == 202, response.json()
    due_at = _due_by_name(_fan_out(response.json()["campaign_id"], _utc(2027, 3, 1)).pk)
    assert due_at == {
        "ny": _utc(2027, 3, 14, 7, 30),          # gap: 02:30 EST = 03:30 EDT
        "berlin": _utc(2027, 3, 14, 1, 30),      # CET (Europe changes on the 28th)
        "ktm": _utc(2027, 3, 13, 20, 45),        # +05:45
        "adelaide": _utc(2027, 3, 13, 16, 0),    # +10:30 (daylight time until April)
        "tokyo": _utc(2027, 3, 13, 17, 30),      # +09:00
        "none": _utc(2027, 3, 14, 2, 30),        # the schedule's fallback zone, Lisbon (WET)
    }


def test_local_time_on_fall_back_days_takes_the_first_occurrence(api, template, segment, settings):
    settings.NOTIFIER_DEFAULT_TIMEZONE = "Asia/Tokyo"
    response = _post(api, template, segment, {"type": "local_time", "local_time": "01:30",
                                              "date": "2027-11-07"})
    assert response.status_code == 202, response.json()
    due_at = _due_by_name(_fan_out(response.json()["campaign_id"], _utc(2027, 10, 1)).pk)
    assert due_at["ny"] == _utc(2027, 11, 7, 5, 30)        # 01:30 EDT, not the second (EST)
    assert due_at["berlin"] == _utc(2027, 11, 7, 0, 30)    # CET since 31 October
    assert due_at["none"] == due_at["tokyo"] == _utc(2027, 11, 6, 16, 30)  # the configured default


def test_local_time_without_a_date_is_the_next_occurrence_in_each_zone(api, template, segment):
    response = _post(api, template, segment, {"type": "local_time", "local_time": "09:00",
                                              "timezone": "UTC"})
    assert response.status_code == 202, response.json()
    now = _utc(2027, 3, 13, 12, 0)  # Saturday noon UTC
    due_at = _due_by_name(_fan_out(response.json()["campaign_id"], now).pk)
    assert due_at == {
        "ny": _utc(2027, 3, 13, 14, 0),          # still ahead today (EST)
        "berlin": _utc(2027, 3, 14, 8, 0),       # passed today: tomorrow
        "ktm": _utc(2027, 3, 14, 3, 15),
        "adelaide": _utc(2027, 3, 13, 22, 30),   # Sunday 09:00 ACDT
        "tokyo": _utc(2027, 3, 14, 0, 0),
        "none": _utc(2027, 3, 14, 9, 0),
    }


def test_optimal_uses_open_history_and_falls_back_to_ten_local(api, template, segment):
    from feedback.models import EmailEvent

    now = timezone.now().replace(microsecond=0)
    for n in range(3):  # 14:40 UTC = 20:25 in Kathmandu; 23:40 in Tokyo
        opened = (now - timedelta(days=n + 1)).replace(hour=14, minute=40)
        for who in ("ktm", "tokyo"):
            EmailEvent.objects.create(provider="ses", provider_event_id=f"{who}{n}", event_type="opened",
                                      recipient=f"{who}@example.com", occurred_at=opened)
    EmailEvent.objects.create(provider="ses", provider_event_id="old", event_type="opened",
                              recipient="berlin@example.com", occurred_at=now - timedelta(days=200))
    response = _post(api, template, segment, {"type": "optimal", "timezone": "UTC"})
    assert response.status_code == 202, response.json()
    due_at = _due_by_name(_fan_out(response.json()["campaign_id"], now).pk)

    def expected(hour: int, zone: str) -> datetime:
        return timing.next_occurrence(time(hour), timing.zone(zone), now=now)

    assert due_at["ktm"] == expected(20, "Asia/Kathmandu")
    assert due_at["tokyo"] == expected(23, "Asia/Tokyo")
    assert due_at["berlin"] == expected(10, "Europe/Berlin")  # history older than 90 days
    assert due_at["ny"] == expected(10, "America/New_York")
    assert due_at["none"] == expected(10, "UTC")


PAST = "2020-01-01T09:00:00+00:00"


@pytest.mark.parametrize(("schedule", "field"), [
    ({"type": "scheduled", "send_at": PAST}, "send_at"),
    ({"type": "scheduled", "send_at": "2030-01-01T09:00:00"}, "send_at"),  # no offset
    ({"type": "scheduled"}, "send_at"),
    ({"type": "recurring", "cron": "0 25 * * *", "timezone": "UTC"}, "cron"),
    ({"type": "recurring", "cron": "every friday", "timezone": "UTC"}, "cron"),
    ({"type": "recurring", "cron": "0 9 31 2 *", "timezone": "UTC"}, "cron"),  # never fires
    ({"type": "recurring", "cron": "0 9 * * 5", "timezone": "Europe/Atlantis"}, "timezone"),
    ({"type": "local_time", "local_time": "09:00"}, "timezone"),  # a contact has none, no default
    ({"type": "local_time", "local_time": "9 o'clock", "timezone": "UTC"}, "local_time"),
    ({"type": "local_time", "local_time": "09:00", "timezone": "UTC", "date": "2020-01-01"}, "date"),
    ({"type": "local_time", "local_time": "09:00", "timezone": "Mars/Olympus"}, "timezone"),
    ({"type": "optimal"}, "timezone"),
    ({"type": "weekly"}, "type"),
])
def test_bad_schedules_are_400_naming_the_field_and_write_nothing(api, template, segment, settings,
                                                                 schedule, field):
    settings.NOTIFIER_DEFAULT_TIMEZONE = ""
    response = _post(api, template, segment, schedule)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert f"schedule.{field}" in error["fields"], error
    assert not Campaign.objects.exists() and not EmailMessage.objects.exists()
    assert not Schedule.objects.exists()
    assert not PeriodicTask.objects.filter(task="scheduling.run_recurring").exists()
    assert get_redis().zcard(due.due_key()) == 0


def test_recurring_through_the_api_runs_once_per_slot_and_not_while_paused(api, template, segment):
    response = _post(api, template, segment, {"type": "recurring", "cron": "0 17 * * 5",
                                              "timezone": "Europe/Berlin"}, campaign_id="friday")
    assert response.status_code == 201, response.json()
    body = response.json()
    schedule = Schedule.objects.get(pk=body["schedule_id"])
    task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
    assert (task.task, task.args, task.enabled) == ("scheduling.run_recurring", f"[{schedule.pk}]", True)
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("0", "17", "5")
    assert schedule.definition["schedule"] == {"type": "immediate"}
    assert not Campaign.objects.exists()  # nothing until the first run

    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    run_recurring.apply(args=[schedule.pk])
    run_recurring.apply(args=[schedule.pk])  # the same slot fired twice
    campaign = Campaign.objects.get()
    assert campaign.status == CS.QUEUED and campaign.schedule == {"type": "immediate"}
    assert campaign.external_id == f"schedule:{schedule.pk}:run:1"
    schedule.refresh_from_db()
    assert schedule.runs == 1 and schedule.campaign_id == campaign.pk
    next_run = schedule.next_run.astimezone(timing.zone("Europe/Berlin"))
    assert next_run > timezone.now() and (next_run.weekday(), next_run.hour) == (4, 17)

    # campaign_launch itself is idempotent per (schedule, run): a replayed run, one campaign.
    again = campaign_launch(definition={**schedule.definition, "schedule_run": {
        "schedule_id": schedule.pk, "run": 1}}, client_id=schedule.client_id)
    assert again.pk == campaign.pk and Campaign.objects.count() == 1

    assert api.post(f"/api/v1/schedules/{schedule.pk}/pause").json()["status"] == "paused"
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    run_recurring.apply(args=[schedule.pk])
    assert Campaign.objects.count() == 1
    api.post(f"/api/v1/schedules/{schedule.pk}/resume")
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    run_recurring.apply(args=[schedule.pk])
    assert Campaign.objects.count() == 2  # the next run is a new campaign


def _scheduled_campaign(api, template, segment, at: datetime) -> Campaign:
    response = _post(api, template, segment, {"type": "scheduled", "send_at": at.isoformat()})
    assert response.status_code == 202, response.json()
    return _fan_out(response.json()["campaign_id"], timezone.now())


def test_cancel_of_a_scheduled_campaign_cancels_its_rows_and_the_dispatch_skips_them(
    api, template, segment
):
    at = timezone.now() + timedelta(hours=1)
    campaign = _scheduled_campaign(api, template, segment, at)
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/cancel").json()["status"] == "CANCELLED"
    lifecycle.campaign_rows_cancel(campaign_id=campaign.pk)  # the cancel task's work
    statuses = set(EmailMessage.objects.filter(campaign=campaign).values_list("status", flat=True))
    assert statuses == {MS.CANCELLED}
    assert Schedule.objects.get(campaign=campaign).status == "cancelled"
    report = due_batch_dispatch(now=at.timestamp() + 1)
    assert (report.claimed, report.dispatched) == (len(ZONES), 0)
    assert get_redis().zcard(due.due_key()) == 0 and get_redis().zcard(due.processing_key()) == 0


def test_deleting_the_schedule_cancels_the_campaign(api, template, segment):
    campaign = _scheduled_campaign(api, template, segment, timezone.now() + timedelta(hours=1))
    schedule = Schedule.objects.get(campaign=campaign)
    assert api.delete(f"/api/v1/schedules/{schedule.pk}").json()["status"] == "cancelled"
    assert Campaign.objects.get(pk=campaign.pk).status == CS.CANCELLED
    assert not EmailMessage.objects.filter(campaign=campaign, status=MS.SCHEDULED).exists()


def test_rows_falling_due_while_paused_are_held_and_go_out_after_resume(
    api, template, segment, django_capture_on_commit_callbacks
):
    at = timezone.now() + timedelta(seconds=2)
    campaign = _scheduled_campaign(api, template, segment, at)
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/pause").json()["status"] == "PAUSED"
    assert Schedule.objects.get(campaign=campaign).status == "paused"
    # Due while paused: the scheduler fences them QUEUED, the claim guard keeps workers off.
    EmailMessage.objects.filter(campaign=campaign).update(scheduled_for=timezone.now() - timedelta(seconds=1))
    report = due_batch_dispatch(now=at.timestamp() + 1)
    assert report.dispatched == len(ZONES)
    assert Campaign.objects.get(pk=campaign.pk).status == CS.PAUSED
    ids = list(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True))
    assert messages_claim(message_ids=ids, token="t1") == []
    with django_capture_on_commit_callbacks() as callbacks:
        assert api.post(f"/api/v1/campaigns/{campaign.pk}/resume").json()["status"] == "QUEUED"
    assert len(callbacks) == 1  # the fan-out, which re-publishes the held rows
    assert Schedule.objects.get(campaign=campaign).status == "active"
    report = campaign_fanout(campaign_id=campaign.pk)
    assert report.republished == len(ZONES)
    assert Campaign.objects.get(pk=campaign.pk).status == CS.SENDING
    assert len(messages_claim(message_ids=ids, token="t2")) == len(ZONES)


def test_resume_before_anything_is_due_goes_back_to_scheduled(api, template, segment):
    campaign = _scheduled_campaign(api, template, segment, timezone.now() + timedelta(hours=1))
    api.post(f"/api/v1/campaigns/{campaign.pk}/pause")
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/resume").json()["status"] == "SCHEDULED"


def test_first_due_row_moves_the_campaign_to_sending(api, template, segment):
    at = timezone.now() + timedelta(hours=1)
    campaign = _scheduled_campaign(api, template, segment, at)
    EmailMessage.objects.filter(campaign=campaign).update(scheduled_for=timezone.now() - timedelta(seconds=1))
    assert due_batch_dispatch(now=at.timestamp()).dispatched == len(ZONES)
    campaign.refresh_from_db()
    assert campaign.status == CS.SENDING and campaign.started_at is not None


def test_a_lost_fanout_is_published_again_once_per_stall_period(template, segment, settings):
    settings.NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS = 30
    audience = {"client_id": factories.owner().pk, "type": "segment", "definition": segment.definition}
    lost = Campaign.objects.create(name="lost", template_version=template, status=CS.QUEUED,
                                   audience=audience)
    fresh = Campaign.objects.create(name="fresh", template_version=template, status=CS.QUEUED,
                                    audience=audience)
    Campaign.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    for pk in (lost.pk, fresh.pk):
        get_redis().delete(redis_key("campaigns", "fanout_watch", pk))
    now = timezone.now().timestamp()
    assert campaigns_lost_fanout_republish(now=now) == [lost.pk]
    assert campaigns_lost_fanout_republish(now=now + 10) == []   # kicked recently
    assert campaigns_lost_fanout_republish(now=now + 31) == [lost.pk]  # still no progress
    Campaign.objects.filter(pk=lost.pk).update(fanout_cursor=10)
    assert campaigns_lost_fanout_republish(now=now + 62) == []   # progress: watch again


def test_a_scheduled_campaign_with_every_recipient_suppressed_completes(api, template, segment):
    from audience.models import Suppression
    from campaigns.services.lifecycle import campaign_complete

    Suppression.objects.bulk_create(Suppression(email=f"{n}@example.com") for n in ZONES)
    campaign = _scheduled_campaign(api, template, segment, timezone.now() + timedelta(hours=1))
    assert campaign.status == CS.SENDING and not EmailMessage.objects.filter(campaign=campaign).exists()
    assert campaign_complete(campaign_id=campaign.pk)


def test_a_fanned_out_campaign_whose_tasks_were_lost_is_published_again(template, settings):
    """A broker that lost its queues (Redis restart) also lost the progress-check chain."""
    from campaigns.services.recovery import campaigns_stalled_sends_republish
    from core.priorities import queue_for
    from notifier.celery import app as celery_app

    settings.NOTIFIER_REQUEUE_AFTER_SECONDS = 0
    stalled = Campaign.objects.create(name="stalled", template_version=template, status=CS.SENDING,
                                      fanout_done=True, priority=3)
    for n in range(3):
        factories.email_message(version=template, campaign=stalled, priority=3,
                                recipient=f"s{n}@example.com")
    get_redis().delete(redis_key("campaigns", "progress", stalled.pk))
    celery_app.control.purge()
    assert campaigns_stalled_sends_republish() == 0   # first sight: progress recorded
    assert campaigns_stalled_sends_republish() == 3   # no progress since: published again
    with celery_app.connection_for_read() as conn:
        waiting = conn.default_channel.queue_declare(queue_for(3), passive=True).message_count
    assert waiting == 1  # one batch task carries the three rows
