"""The `schedule` parameter of POST /api/v1/messages, the schedules API and cancel-by-key."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from audience.models import Contact
from core.redis_client import get_redis
from delivery.models import EmailMessage
from scheduling import timing
from scheduling.models import Schedule
from scheduling.services import due
from scheduling.services.recurring import _claim_run
from tests import factories

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status


@pytest.fixture
def send(api, otp_template, django_capture_on_commit_callbacks):
    def _send(schedule=None, to="ada@example.com", **extra):
        body = {"to": to, "template": "otp", "priority": "normal",
                "context": {"name": "Ada", "code": "1"}, **extra}
        if schedule is not None:
            body["schedule"] = schedule
        with django_capture_on_commit_callbacks(execute=True):
            return api.post("/api/v1/messages", body, format="json")
    return _send


def _due_score(message_id: int) -> float | None:
    return get_redis().zscore(due.due_key(), str(message_id))


def test_scheduled_send_waits_in_the_due_set(send):
    send_at = (timezone.now() + timedelta(hours=2)).astimezone(timing.zone("Asia/Kolkata"))
    response = send({"type": "scheduled", "send_at": send_at.isoformat()})
    assert response.status_code == 202, response.json()
    message = EmailMessage.objects.get(pk=response.json()["id"])
    assert (message.status, message.scheduled_for) == (Status.SCHEDULED, send_at)
    assert _due_score(message.id) == pytest.approx(send_at.timestamp())


def test_immediate_is_the_default(send, monkeypatch):
    published = []
    monkeypatch.setattr("transactional.services.messages_enqueue", lambda **kw: published.append(kw))
    response = send({"type": "immediate"})
    assert response.json()["status"] == Status.QUEUED and len(published) == 1
    assert get_redis().zcard(due.due_key()) == 0


def test_delayed_send_with_cancel_key_is_cancelled_before_dispatch(send, api):
    before = timezone.now()
    response = send({"type": "delayed", "delay_seconds": 3600, "cancel_key": "cart-42"})
    message = EmailMessage.objects.get(pk=response.json()["id"])
    assert message.status == Status.SCHEDULED and message.cancel_key == "cart-42"
    assert before + timedelta(seconds=3600) <= message.scheduled_for <= timezone.now() + timedelta(hours=1)
    cancel = api.post("/api/v1/schedules/cancel", {"cancel_key": "cart-42"}, format="json")
    assert cancel.status_code == 200
    assert cancel.json() == {"cancel_key": "cart-42", "cancelled": 1, "message_ids": [message.id],
                             "already_dispatched": 0}
    message.refresh_from_db()
    assert message.status == Status.CANCELLED
    again = api.post("/api/v1/schedules/cancel", {"cancel_key": "cart-42"}, format="json")
    assert again.json()["cancelled"] == 0


def test_local_time_uses_the_request_then_the_contact_timezone(send):
    now = timezone.now()
    response = send({"type": "local_time", "local_time": "09:00", "timezone": "Asia/Kathmandu"})
    expected = timing.next_occurrence(time(9), timing.zone("Asia/Kathmandu"), now=now)
    assert EmailMessage.objects.get(pk=response.json()["id"]).scheduled_for == expected
    Contact.objects.create(client=factories.owner(), email="bob@example.com", timezone="America/New_York")
    response = send({"type": "local_time", "local_time": "07:30"}, to="Bob@example.com")
    expected = timing.next_occurrence(time(7, 30), timing.zone("America/New_York"), now=now)
    assert EmailMessage.objects.get(pk=response.json()["id"]).scheduled_for == expected


def test_local_time_on_a_date_and_optimal_without_history(send, settings):
    day = (timezone.now() + timedelta(days=3)).date()
    response = send({"type": "local_time", "local_time": "09:00", "date": day.isoformat(),
                     "timezone": "Europe/Berlin"})
    expected = timing.local_to_utc(day, time(9), timing.zone("Europe/Berlin"))
    assert EmailMessage.objects.get(pk=response.json()["id"]).scheduled_for == expected
    settings.NOTIFIER_DEFAULT_TIMEZONE = "Asia/Kolkata"
    response = send({"type": "optimal"})
    scheduled = EmailMessage.objects.get(pk=response.json()["id"]).scheduled_for
    local = scheduled.astimezone(timing.zone("Asia/Kolkata"))
    assert (local.hour, local.minute) == (10, 0) and scheduled > timezone.now()


@pytest.mark.parametrize(("schedule", "field"), [
    ({"type": "scheduled", "send_at": "2020-01-01T09:00:00+00:00"}, "send_at"),
    ({"type": "scheduled", "send_at": "2099-01-01T09:00:00"}, "send_at"),   # no offset
    ({"type": "scheduled", "send_at": "next tuesday"}, "send_at"),
    ({"type": "scheduled"}, "send_at"),
    ({"type": "local_time", "local_time": "09:00"}, "timezone"),              # none available
    ({"type": "local_time", "local_time": "09:00", "timezone": "Mars/Olympus"}, "timezone"),
    ({"type": "local_time", "local_time": "9 o'clock", "timezone": "UTC"}, "local_time"),
    ({"type": "local_time", "local_time": "09:00", "timezone": "UTC", "date": "2020-01-01"}, "date"),
    ({"type": "delayed", "cancel_key": "x"}, "delay_seconds"),
    ({"type": "delayed", "delay_seconds": 0}, "delay_seconds"),
    ({"type": "recurring", "cron": "0 9 * * *"}, "type"),
    ({"type": "immediate", "cancel_key": "x"}, "cancel_key"),
])
def test_bad_schedules_are_400_naming_the_field_and_write_nothing(send, settings, schedule, field):
    settings.NOTIFIER_DEFAULT_TIMEZONE = ""
    response = send(schedule)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "invalid" and f"schedule.{field}" in error["fields"], error
    assert EmailMessage.objects.count() == 0 and get_redis().zcard(due.due_key()) == 0


# `definition` is what each run launches, validated as a campaign launch is (otp_template).
RECURRING = {"name": "friday flash sale", "type": "recurring", "cron": "0 17 * * 5",
             "timezone": "Europe/Berlin", "definition": {
                 "template_id": "otp", "recipients": {"type": "inline",
                                                      "contacts": [{"email": "ada@example.com"}]}}}


@pytest.mark.parametrize(("change", "field"), [
    ({"cron": "0 25 * * *"}, "cron"), ({"cron": "every friday"}, "cron"),
    ({"timezone": "Europe/Atlantis"}, "timezone"), ({"definition": "x"}, "definition"),
    ({"cron": "0 9 31 2 *"}, "cron"), ({"cron": "0 0 30 2 *"}, "cron"),  # never fire
    ({"definition": {}}, "definition.template_id"), ({"definition": {"foo": 1}}, "definition.recipients"),
    ({"definition": {"template_id": "nope", "recipients": {"type": "inline", "contacts": [
        {"email": "ada@example.com"}]}}}, "definition.template_id"),
])
def test_bad_recurring_schedules_are_400_naming_the_field_and_write_nothing(
        api, otp_template, change, field):
    response = api.post("/api/v1/schedules", {**RECURRING, **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert Schedule.objects.count() == 0
    assert not PeriodicTask.objects.filter(task="scheduling.run_recurring").exists()


def test_recurring_schedule_lifecycle_through_the_api(api, otp_template):
    created = api.post("/api/v1/schedules", RECURRING, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    schedule = Schedule.objects.get(pk=body["id"])
    task = schedule.periodic_task
    assert task.task == "scheduling.run_recurring" and task.args == f"[{schedule.pk}]" and task.enabled
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("0", "17", "5")
    assert str(task.crontab.timezone) == "Europe/Berlin"
    next_run = datetime.fromisoformat(body["next_run"]).astimezone(timing.zone("Europe/Berlin"))
    assert (next_run.weekday(), next_run.hour, next_run.minute) == (4, 17, 0)

    listing = api.get("/api/v1/schedules").json()
    assert [s["id"] for s in listing["schedules"]] == [schedule.pk]
    assert set(listing["schedules"][0]) >= {"id", "campaign_id", "type", "cron", "scheduled_at", "next_run",
                                            "last_run", "status", "pending_count"}
    assert set(listing["queue_snapshot"]) == {"critical", "high", "normal", "low"}
    assert set(listing["queue_snapshot"]["low"]) == {"pending", "processing", "oldest_age_seconds"}

    assert api.post(f"/api/v1/schedules/{schedule.pk}/pause").json()["status"] == "paused"
    assert not PeriodicTask.objects.get(pk=task.pk).enabled
    assert api.post(f"/api/v1/schedules/{schedule.pk}/resume").json()["status"] == "active"
    assert PeriodicTask.objects.get(pk=task.pk).enabled
    assert api.get(f"/api/v1/schedules/{schedule.pk}").json()["status"] == "active"
    assert api.delete(f"/api/v1/schedules/{schedule.pk}").json()["status"] == "cancelled"
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()


def test_queue_snapshot_counts_pending_and_processing(api, otp_template):
    from tests import factories
    # Queued 30 s ago and re-published just now: it has still waited 30 s.
    waiting = factories.email_message(priority=3, status=Status.QUEUED, requeued_at=timezone.now())
    EmailMessage.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(seconds=30))
    factories.email_message(priority=3, status=Status.SENDING)
    snapshot = api.get("/api/v1/schedules").json()["queue_snapshot"]
    assert snapshot["low"]["pending"] == 1 and snapshot["low"]["processing"] == 1
    assert 29 <= snapshot["low"]["oldest_age_seconds"] < 120
    assert snapshot["critical"] == {"pending": 0, "processing": 0, "oldest_age_seconds": None}


def test_a_recurring_run_is_claimed_once_per_slot_and_not_while_paused(api, otp_template):
    schedule_id = api.post("/api/v1/schedules", {**RECURRING, "cron": "0 9 * * *",
                                                 "timezone": "America/New_York"}, format="json").json()["id"]
    Schedule.objects.filter(pk=schedule_id).update(next_run=datetime(2026, 3, 7, 14, tzinfo=UTC))
    fire = datetime(2026, 3, 7, 14, 0, 1, tzinfo=UTC)  # Saturday 09:00 EST
    claimed = _claim_run(schedule_id, fire)
    assert claimed.runs == 1 and claimed.last_run == fire
    assert claimed.next_run == datetime(2026, 3, 8, 13, tzinfo=UTC)  # Sunday 09:00 EDT
    assert _claim_run(schedule_id, fire + timedelta(seconds=2)) is None  # duplicate fire
    api.post(f"/api/v1/schedules/{schedule_id}/pause")
    assert _claim_run(schedule_id, datetime(2026, 3, 8, 13, tzinfo=UTC)) is None


def test_a_one_off_campaign_schedule_lists_its_pending_count_and_cancel_stops_its_rows(api, api_key):
    from campaigns.models import Campaign
    from clients.models import Service
    from scheduling.services.one_off import schedule_record_campaign
    from tests import factories

    version = factories.template_version()
    client = Service.objects.get()
    campaign = Campaign.objects.create(name="flash sale", template_version=version, client=client)
    at = timezone.now() + timedelta(hours=3)
    rows = [factories.email_message(version=version, campaign=campaign, status=Status.SCHEDULED,
                                    scheduled_for=at) for _ in range(3)]
    due.messages_schedule(items=[(m.id, at) for m in rows])
    schedule = schedule_record_campaign(client_id=client.pk, campaign_id=campaign.pk, name="flash sale",
                                        type="local_time", scheduled_at=at, timezone="Europe/Berlin")
    listed = api.get("/api/v1/schedules").json()["schedules"][0]
    assert (listed["campaign_id"], listed["pending_count"], listed["type"]) == (campaign.pk, 3, "local_time")
    assert api.delete(f"/api/v1/schedules/{schedule.pk}").json()["pending_count"] == 0
    assert EmailMessage.objects.filter(campaign=campaign, status=Status.CANCELLED).count() == 3


def test_the_beat_task_is_registered_under_the_name_the_periodic_task_uses():
    from notifier.celery import app
    from scheduling.services.recurring import TASK_NAME

    app.loader.import_default_modules()
    assert TASK_NAME == "scheduling.run_recurring" and TASK_NAME in app.tasks


def _is_ambiguous(naive: datetime, tz) -> bool:
    """This wall time happens twice in `tz` (repeated by a fall-back)."""
    first, second = (naive.replace(tzinfo=tz, fold=fold).utcoffset() for fold in (0, 1))
    return first != second and not timing.is_gap(naive, tz)


def _next_dst_day(tz_name: str, *, gap: bool) -> datetime:
    """The next day (from today) on which 02:30 local falls in a DST gap (or 01:30 in an overlap)."""
    tz = timing.zone(tz_name)
    day = timezone.now().date() + timedelta(days=1)
    for _ in range(400):
        if gap and timing.is_gap(datetime(day.year, day.month, day.day, 2, 30), tz):
            return day
        if not gap and _is_ambiguous(datetime(day.year, day.month, day.day, 1, 30), tz):
            return day
        day += timedelta(days=1)
    raise AssertionError("no DST change within 400 days")


@pytest.mark.parametrize(("tz_name", "at", "gap", "offset_hours"), [
    ("America/New_York", "02:30", True, -5),   # shifted forward: read with EST, i.e. 03:30 EDT
    ("America/New_York", "01:30", False, -4),  # first occurrence: EDT
    ("Europe/Berlin", "02:30", True, 1),       # read with CET, i.e. 03:30 CEST
])
def test_local_time_on_a_dst_change_day_through_the_api(send, tz_name, at, gap, offset_hours):
    day = _next_dst_day(tz_name, gap=gap)
    response = send({"type": "local_time", "local_time": at, "date": day.isoformat(), "timezone": tz_name})
    assert response.status_code == 202, response.json()
    hour, minute = map(int, at.split(":"))
    wall = datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
    expected = wall - timedelta(hours=offset_hours)
    assert EmailMessage.objects.get(pk=response.json()["id"]).scheduled_for == expected


def test_optimal_uses_the_recipients_open_history(send):
    from feedback.models import EmailEvent

    Contact.objects.create(client=factories.owner(), email="ada@example.com", timezone="Asia/Kolkata")
    for n in range(3):  # 14:40 UTC = 20:10 in Kolkata
        opened = (timezone.now() - timedelta(days=n + 1)).replace(hour=14, minute=40)
        EmailEvent.objects.create(provider="ses", provider_event_id=f"o{n}", event_type="opened",
                                  recipient="ada@example.com", occurred_at=opened)
    response = send({"type": "optimal"})
    scheduled = EmailMessage.objects.get(pk=response.json()["id"]).scheduled_for
    local = scheduled.astimezone(timing.zone("Asia/Kolkata"))
    assert (local.hour, local.minute) == (20, 0)
    assert timedelta(0) < scheduled - timezone.now() <= timedelta(days=1)


def test_admin_lists_schedules_and_its_pause_action_uses_the_service(api, admin_client, otp_template):
    schedule_id = api.post("/api/v1/schedules", RECURRING, format="json").json()["id"]
    assert admin_client.get("/admin/scheduling/schedule/").status_code == 200
    assert admin_client.get(f"/admin/scheduling/schedule/{schedule_id}/change/").status_code == 200
    response = admin_client.post("/admin/scheduling/schedule/",
                                 {"action": "pause", "_selected_action": [schedule_id]})
    assert response.status_code == 302
    schedule = Schedule.objects.get(pk=schedule_id)
    assert schedule.status == "paused" and not schedule.periodic_task.enabled


def test_the_admin_form_edits_only_the_name_status_goes_through_the_actions(api, admin_client, otp_template):
    """A status or cron set in the form would skip the services (the beat task kept, no
    `cancelled_at`): the form changes the name only, and the cancel action does the rest."""
    schedule_id = api.post("/api/v1/schedules", RECURRING, format="json").json()["id"]
    before = Schedule.objects.get(pk=schedule_id)
    url = f"/admin/scheduling/schedule/{schedule_id}/change/"
    response = admin_client.post(url, {"name": "renamed", "status": "cancelled", "cron": "0 3 * * *",
                                       "type": "scheduled", "timezone": "Asia/Tokyo"})
    assert response.status_code == 302, response.content.decode()[:2000]
    after = Schedule.objects.get(pk=schedule_id)
    assert after.name == "renamed"
    assert (after.status, after.cron, after.type, after.timezone, after.periodic_task_id) == (
        before.status, before.cron, before.type, before.timezone, before.periodic_task_id)
    assert admin_client.get("/admin/scheduling/schedule/add/").status_code == 403
    admin_client.post("/admin/scheduling/schedule/", {"action": "cancel", "_selected_action": [schedule_id]})
    cancelled = Schedule.objects.get(pk=schedule_id)
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None
    assert cancelled.periodic_task_id is None
    assert not PeriodicTask.objects.filter(pk=before.periodic_task_id).exists()


def test_the_schedules_listing_shows_the_clients_waiting_one_off_sends(send, api):
    """A local_time or delayed message is listed (soonest first); another client's is not."""
    from clients.services import service_create

    local = send({"type": "local_time", "local_time": "09:00", "timezone": "Europe/Berlin"}).json()
    delayed = send({"type": "delayed", "delay_seconds": 60, "cancel_key": "cart-7"}).json()
    immediate = send().json()
    other_client, _ = service_create(name="other-service")
    foreign = EmailMessage.objects.get(pk=delayed["id"])
    foreign.pk, foreign.idempotency_key, foreign.client = None, "other-1", other_client
    foreign.save()
    listing = api.get("/api/v1/schedules").json()["scheduled_messages"]
    assert listing["count"] == 2
    assert [m["id"] for m in listing["messages"]] == [delayed["id"], local["id"]]
    assert listing["messages"][0]["cancel_key"] == "cart-7"
    assert listing["messages"][1]["to"] == "ada@example.com"
    assert immediate["id"] not in [m["id"] for m in listing["messages"]]
