"""Analytics API and /metrics: numbers that match the events processed and the rows queued."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.redis_client import get_redis
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.services.circuit_breaker import breaker_record_failure, events_key, state_key
from delivery.tasks import send_batch
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from tests.feedback.helpers import T0, campaign, event, sent_messages

pytestmark = pytest.mark.django_db


def test_campaign_stats_match_the_events(api):
    c = campaign()
    messages = sent_messages(10, campaign_obj=c)
    batch = [event(m, E.DELIVERED) for m in messages[:8]]
    batch += [event(m, E.OPENED, seconds=90) for m in messages[:4]]
    batch += [event(messages[0], E.OPENED, seconds=95)]  # a second open of the same message
    batch += [event(messages[0], E.CLICKED, seconds=100), event(messages[9], E.BOUNCED, bounce="hard")]
    batch += [event(messages[1], E.COMPLAINED, seconds=200), event(messages[2], E.UNSUBSCRIBED, seconds=200)]
    events_process(events=batch)
    response = api.get(f"/api/v1/campaigns/{c.id}/stats")
    assert response.status_code == 200, response.content
    body = response.json()
    counts = body["counts"]
    assert (counts["sent"], counts["delivered"], counts["opened"], counts["clicked"]) == (10, 8, 4, 1)
    assert (counts["bounced"], counts["complained"], counts["unsubscribed"]) == (1, 1, 1)
    assert body["rates"] == {"delivery": 0.8, "open": 0.5, "click": 0.125, "bounce": 0.1,
                             "complaint": 0.125, "unsubscribe": 0.125}
    assert body["providers"]["sendgrid"]["sent"] == 10 and body["providers"]["sendgrid"]["opened"] == 4
    points = {p["t"]: p for p in body["series"]["points"]}
    minute0, minute1 = T0.isoformat(), (T0 + timedelta(minutes=1)).isoformat()
    assert points[minute0]["delivered"] == 8 and points[minute0]["bounced"] == 1
    assert points[minute1]["opened"] == 5 and points[minute1]["clicked"] == 1
    hourly = api.get(f"/api/v1/campaigns/{c.id}/stats?interval=hour").json()["series"]["points"]
    assert {p["t"]: p.get("opened") for p in hourly if "opened" in p} == {T0.isoformat(): 5}


def test_campaign_stats_validation_and_auth(api, client):
    c = campaign()
    bad = api.get(f"/api/v1/campaigns/{c.id}/stats?interval=fortnight")
    assert bad.status_code == 400 and "interval" in bad.json()["error"]["fields"]
    assert api.get("/api/v1/campaigns/999999/stats").status_code == 404
    assert client.get(f"/api/v1/campaigns/{c.id}/stats").status_code in (401, 403)


def test_overview_reports_backlog_age_alerts_and_providers(api, purged_queues):
    now = timezone.now()
    old_p0 = sent_messages(1, status="QUEUED")[0]  # P2 helper rows; make one P0 and stale
    EmailMessage.objects.filter(pk=old_p0.pk).update(priority=0, created_at=now - timedelta(seconds=30))
    p2 = sent_messages(3, status="QUEUED")
    EmailMessage.objects.filter(pk__in=[m.pk for m in p2]).update(created_at=now - timedelta(minutes=10))
    sending = sent_messages(2, status="SENDING")
    DeliveryAttempt.objects.bulk_create(
        [DeliveryAttempt(message=sending[0], provider="smtp", outcome="accepted", duration_ms=40)] * 3
        + [DeliveryAttempt(message=sending[1], provider="smtp", outcome="transient", duration_ms=900)]
    )
    breaker_record_failure(provider="smtp", retry_after=60)  # a 429 holds the breaker open
    for _ in range(3):
        send_batch.apply_async(args=([1], 3, 0), queue="email-send-p3")  # no worker consumes p3 here
    try:
        body = api.get("/api/v1/stats/overview").json()
    finally:
        get_redis().delete(state_key("smtp"), events_key("smtp"))  # closed again
    queues = {q["priority"]: q for q in body["queues"]}
    assert queues["critical"]["pending"] == 1 and queues["critical"]["alert"] == "critical"  # 30 s > 10 s
    assert queues["normal"]["pending"] == 3 and queues["normal"]["processing"] == 2
    assert queues["normal"]["alert"] == "warning"  # 10 min > half of 15 min
    assert queues["low"]["broker_tasks"] == 3 and queues["low"]["alert"] == "ok"
    assert body["alerts"]["overall"] == "critical"
    smtp = next(p for p in body["providers"] if p["provider"] == "smtp")
    assert (smtp["attempts"], smtp["failed"], smtp["error_rate"], smtp["breaker"]) == (4, 1, 0.25, "open")
    assert body["throughput"]["per_priority"]["normal"] == 5  # sent_messages rows carry sent_at=now


def test_metrics_exposes_queues_providers_latency_and_webhook_events(client, purged_queues):
    messages = sent_messages(2)
    DeliveryAttempt.objects.create(message=messages[0], provider="smtp", outcome="accepted", duration_ms=120)
    events_process(events=[event(m, E.DELIVERED) for m in messages] + [event(messages[0], E.OPENED)])
    text = client.get("/metrics").content.decode()
    assert 'notifier_queue_pending_messages{priority="critical"} 0.0' in text
    assert 'notifier_provider_attempts_total{outcome="accepted",provider="smtp"} 1.0' in text
    assert 'notifier_provider_call_seconds_bucket{le="0.25",priority="normal"} 1.0' in text
    assert 'notifier_provider_call_seconds_bucket{le="0.1",priority="normal"} 0.0' in text
    assert 'notifier_webhook_events_total{provider="sendgrid",type="delivered"} 2.0' in text
    assert "notifier_queue_oldest_age_seconds" in text
