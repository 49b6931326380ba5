"""Dashboard access rules, its JSON document and the campaign action endpoint."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from campaigns.models import Campaign
from clients.models import Service
from delivery.models import DeliveryAttempt, EmailMessage
from feedback.normalize import EventType
from feedback.services.processing import events_process
from tests import factories
from tests.feedback.helpers import campaign, event, sent_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("ops", password="pw-ops-123", is_staff=True)
    client.force_login(user)
    return client


def test_dashboard_requires_staff(client):
    response = client.get("/dashboard/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    user = get_user_model().objects.create_user("plain", password="pw-plain-123")
    client.force_login(user)
    assert client.get("/dashboard/data.json").status_code == 302
    assert client.post("/dashboard/campaigns/1/pause").status_code == 302


def test_dashboard_page_and_data(staff_client, settings):
    settings.FLOWER_URL = "http://127.0.0.1:5555/"
    c = campaign()
    sent_messages(3, campaign_obj=c)
    sent_messages(2, campaign_obj=c, status="QUEUED")
    page = staff_client.get("/dashboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="http://127.0.0.1:5555/"' in html and "chart-4.6.1.umd.min.js" in html
    data = staff_client.get("/dashboard/data.json").json()
    assert [q["priority"] for q in data["queues"]] == ["critical", "high", "normal", "low"]
    row = next(r for r in data["campaigns"] if r["id"] == c.id)
    assert (row["done"], row["total"]) == (3, 5)
    assert data["dead_letters"] is None or isinstance(data["dead_letters"], list)


def test_campaign_progress_counts_against_the_whole_audience(staff_client, api):
    # The fan-out counted 1,000 recipients and has written 10 rows so far.
    owner = Service.objects.get(name="test-service")
    c = campaign(audience_size=1000, client=owner)
    sent_messages(3, campaign_obj=c)
    sent_messages(2, campaign_obj=c, status="CANCELLED")  # cancelled recipients are not done
    sent_messages(5, campaign_obj=c, status="QUEUED")
    row = next(r for r in staff_client.get("/dashboard/data.json").json()["campaigns"] if r["id"] == c.id)
    assert (row["done"], row["total"]) == (3, 1000)
    counts = api.get(f"/api/v1/campaigns/{c.id}/stats").json()["counts"]
    assert (counts["done"], counts["audience"]) == (3, 1000)
    counters = api.get(f"/api/v1/campaigns/{c.id}").json()["counters"]
    assert (counters["done"], counters["total"]) == (3, 1000)


def _queues(staff_client) -> dict[str, dict]:
    return {q["priority"]: q for q in staff_client.get("/dashboard/data.json").json()["queues"]}


def test_sla_state_compares_the_oldest_age_with_the_sla(staff_client):
    # A big campaign just queued on the low queue (SLA 1 h): on time, whatever its size.
    version = factories.template_version()
    EmailMessage.objects.bulk_create(
        [EmailMessage(recipient=f"bulk{i}@example.com", template_version=version, priority=3,
                      idempotency_key=f"sla:{i}") for i in range(10_001)], batch_size=5000)
    low = _queues(staff_client)["low"]
    assert low["pending"] == 10_001 and low["oldest_age_seconds"] < 60
    assert low["alert"] == "ok"
    EmailMessage.objects.filter(priority=3).update(created_at=timezone.now() - timedelta(minutes=40))
    assert _queues(staff_client)["low"]["alert"] == "warning"  # past half its SLA
    EmailMessage.objects.filter(priority=3).update(created_at=timezone.now() - timedelta(minutes=61))
    assert _queues(staff_client)["low"]["alert"] == "critical"


def test_dashboard_and_schedules_api_share_one_oldest_age(staff_client, api):
    now = timezone.now()
    # Scheduled a day ago for 5 s ago, dispatched 1 s ago: it has waited 5 s, not a day.
    scheduled = factories.email_message(priority=1, status=EmailMessage.Status.QUEUED,
                                        scheduled_for=now - timedelta(seconds=5), requeued_at=now)
    EmailMessage.objects.filter(pk=scheduled.pk).update(created_at=now - timedelta(days=1))
    # Stuck for 10 min, re-published by recovery just now: it has waited 10 min, not 0 s.
    stuck = factories.email_message(priority=2, status=EmailMessage.Status.QUEUED, requeued_at=now)
    EmailMessage.objects.filter(pk=stuck.pk).update(created_at=now - timedelta(minutes=10))
    dashboard = _queues(staff_client)
    snapshot = api.get("/api/v1/schedules").json()["queue_snapshot"]
    assert 5 <= dashboard["high"]["oldest_age_seconds"] < 60 and dashboard["high"]["alert"] == "ok"
    assert 600 <= dashboard["normal"]["oldest_age_seconds"] < 700
    for priority in ("high", "normal"):
        assert abs(snapshot[priority]["oldest_age_seconds"] - dashboard[priority]["oldest_age_seconds"]) < 5


def _attempts(provider: str, accepted: int, failed: int) -> None:
    (message,) = sent_messages(1)
    DeliveryAttempt.objects.bulk_create(
        [DeliveryAttempt(message=message, provider=provider, outcome="accepted")] * accepted
        + [DeliveryAttempt(message=message, provider=provider, outcome="transient")] * failed
    )


def test_overall_badge_turns_red_when_a_provider_fails_too_often(staff_client, settings):
    settings.FEEDBACK_PROVIDER_ERROR_RATE_ALERT, settings.FEEDBACK_PROVIDER_ALERT_MIN_ATTEMPTS = 0.2, 20
    _attempts("ses", accepted=18, failed=2)  # 10%: fine
    _attempts("sendgrid", accepted=1, failed=1)  # 50% of 2 calls: too few to judge
    data = staff_client.get("/dashboard/data.json").json()
    assert data["alerts"]["overall"] == "ok"
    _attempts("sendgrid", accepted=15, failed=4)  # 5 of 21: 24%
    data = staff_client.get("/dashboard/data.json").json()
    assert data["alerts"]["overall"] == "critical"
    per_provider = data["alerts"]["per_provider"]
    assert (per_provider["sendgrid"], per_provider["ses"]) == ("critical", "ok")
    page = staff_client.get("/dashboard/").content.decode()
    assert '<span id="overall" class="badge critical">' in page


def test_throughput_chart_plots_zero_for_minutes_without_sends(staff_client):
    now = timezone.now()
    for minutes_ago in (30, 5):  # the only two minutes with sends
        (message,) = sent_messages(1)
        EmailMessage.objects.filter(pk=message.pk).update(sent_at=now - timedelta(minutes=minutes_ago))
    points = staff_client.get("/dashboard/data.json").json()["throughput"]["per_minute"]
    assert len(points) >= 60  # every minute of the last hour
    minutes = [datetime.fromisoformat(p["t"]) for p in points]
    assert all(b - a == timedelta(minutes=1) for a, b in pairwise(minutes))
    normal = [p["normal"] for p in points]
    assert sum(normal) == 2 and normal.count(0) == len(points) - 2
    assert all(p["critical"] == 0 for p in points)


def test_campaign_buttons_change_the_campaign(staff_client):
    c = campaign()
    paused = staff_client.post(f"/dashboard/campaigns/{c.id}/pause")
    assert paused.status_code == 200 and paused.json()["status"] == "PAUSED"
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.PAUSED
    # Refused as the API refuses it: a 409 saying why, which the page shows.
    again = staff_client.post(f"/dashboard/campaigns/{c.id}/pause")
    assert again.status_code == 409
    assert again.json()["error"]["message"] == "Cannot pause a campaign that is PAUSED."
    assert staff_client.post("/dashboard/campaigns/999999/cancel").status_code == 404
    assert staff_client.post(f"/dashboard/campaigns/{c.id}/resume").json()["changed"] is True
    # the campaigns lifecycle resumes into QUEUED; the next batch moves it to SENDING
    assert Campaign.objects.get(pk=c.pk).status in (Campaign.Status.QUEUED, Campaign.Status.SENDING)
    staff_client.post(f"/dashboard/campaigns/{c.id}/cancel")
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.CANCELLED
    bad = staff_client.post(f"/dashboard/campaigns/{c.id}/explode")
    assert bad.status_code == 400 and "action" in bad.json()["error"]["fields"]


def test_feedback_admin_pages_load(staff_client):
    admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
    staff_client.force_login(admin)
    (message,) = sent_messages(1, campaign_obj=campaign())
    events_process(events=[event(message, EventType.DELIVERED)])
    for model in ("emailevent", "webhookdelivery", "campaigneventcounter", "reputationhold"):
        assert staff_client.get(f"/admin/feedback/{model}/").status_code == 200, model


def test_campaigns_stay_listed_for_a_day_after_they_end_with_their_final_counts(staff_client):
    running = campaign()
    done = campaign(status=Campaign.Status.COMPLETED, completed_at=timezone.now() - timedelta(hours=2))
    sent_messages(4, campaign_obj=done)
    sent_messages(1, campaign_obj=done, status="FAILED")
    cancelled = campaign(status=Campaign.Status.CANCELLED, completed_at=timezone.now() - timedelta(minutes=5))
    sent_messages(2, campaign_obj=cancelled, status="CANCELLED")
    campaign(status=Campaign.Status.COMPLETED, completed_at=timezone.now() - timedelta(hours=25))  # gone
    rows = staff_client.get("/dashboard/data.json").json()["campaigns"]
    assert [r["id"] for r in rows] == [running.id, cancelled.id, done.id]  # running first, then last ended
    by_id = {r["id"]: r for r in rows}
    assert by_id[running.id]["ended_at"] is None
    assert by_id[done.id]["ended_at"] == done.completed_at.isoformat()
    assert (by_id[done.id]["done"], by_id[done.id]["total"]) == (5, 5)
    assert by_id[done.id]["counts"] == {"sent": 4, "failed": 1, "suppressed": 0, "cancelled": 0}
    assert by_id[cancelled.id]["counts"]["cancelled"] == 2


def test_pool_panel_says_why_flower_lists_no_critical_tasks(staff_client, monkeypatch):
    monkeypatch.delenv("NOTIFIER_FAST_POOL_TASK_EVENTS", raising=False)
    data = staff_client.get("/dashboard/data.json").json()
    assert data["pools_without_task_events"] == ["critical", "high"]
    html = staff_client.get("/dashboard/").content.decode()
    assert "Flower shows the workers of the\n  critical and high pools but none of their tasks" in html
    monkeypatch.setenv("NOTIFIER_FAST_POOL_TASK_EVENTS", "true")
    assert 'id="pool-events-note"' not in staff_client.get("/dashboard/").content.decode()
