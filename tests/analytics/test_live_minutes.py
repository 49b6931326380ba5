"""The dashboard's webhook events per minute and its provider health keep settled minutes in
Redis as the sends do (decision 138): the same figures as a plain recount, cold and warm, and a
repeated call counts only the open minutes."""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.selectors.kept_minutes import SETTLE, series_keep, series_window, summed
from analytics.selectors.overview import webhook_summary
from analytics.selectors.queues import (
    SENDS,
    latency_percentile,
    provider_calls_per_minute,
    provider_health,
)
from clients.key_types import KeyType
from core import live_counts
from core.live_counts import live_counts_add, live_counts_read, minute_of, provider_call_counts
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.services.sandbox import SANDBOX_PROVIDER
from delivery.tasks import send_batch
from feedback.models import EmailEvent
from feedback.normalize import EventType
from feedback.services.processing import events_process
from testkit.fakes import FakeSendGrid
from tests.factories import email_message, template_version
from tests.feedback.helpers import event, sent_messages

pytestmark = pytest.mark.django_db
TYPES = ["delivered", "opened", "clicked", "bounced"]


def _events(count: int) -> list[tuple[datetime, str, bool, str]]:
    """Events received over the last 65 minutes: (received_at, type, message known, provider),
    sandbox ones and ones for an unknown message among them."""
    (message,) = sent_messages(1)
    now = timezone.now()
    spread = []
    for i in range(count):
        known = i % 7 != 0
        provider = SANDBOX_PROVIDER if i % 11 == 0 else "sendgrid"
        spread.append((now - timedelta(seconds=5 + i * 3900 // count), TYPES[i % 4], known, provider))
    rows = EmailEvent.objects.bulk_create(
        EmailEvent(message=message if known else None, provider=provider, provider_event_id=f"e{i}",
                   event_type=event_type, recipient=message.recipient, occurred_at=now)
        for i, (_, event_type, known, provider) in enumerate(spread))
    for row, (received_at, *_) in zip(rows, spread, strict=True):
        EmailEvent.objects.filter(pk=row.pk).update(received_at=received_at)
    return spread


def _recount(spread, *, first: datetime) -> tuple[dict[str, Counter], Counter, int]:
    per_minute: dict[str, Counter] = {}
    totals, unknown = Counter(), 0
    for received_at, event_type, known, provider in spread:
        if received_at >= first and provider != SANDBOX_PROVIDER:
            per_minute.setdefault(minute_of(received_at).isoformat(), Counter())[event_type] += 1
            totals[event_type] += 1
            unknown += not known
    return per_minute, totals, unknown


def _assert_events_recounted(summary: dict, spread) -> None:
    points = summary["per_minute"]
    assert len(points) == 61
    per_minute, totals, unknown = _recount(spread, first=datetime.fromisoformat(points[0]["t"]))
    for point in points:
        assert {k: v for k, v in point.items() if k != "t"} == dict(per_minute.get(point["t"], {})), point
    assert summary["events_last_hour"] == dict(totals)
    assert summary["unknown_message_events_last_hour"] == unknown > 0


def test_events_equal_a_plain_recount_cold_and_warm():
    spread = _events(200)
    _assert_events_recounted(webhook_summary(), spread)
    with CaptureQueriesContext(connection) as captured:
        warm = webhook_summary()
    _assert_events_recounted(warm, spread)
    (query,) = [q["sql"] for q in captured.captured_queries if "received_at" in q["sql"]]
    (bound,) = re.findall(r"\"received_at\" >= '([^']+)'", query)
    # The warm call counts from the first minute not settled, not the hour.
    assert datetime.fromisoformat(bound) >= timezone.now() - SETTLE - timedelta(minutes=2)


def _attempts(durations: list[tuple[int, int, str, str]]) -> None:
    """Attempts (seconds ago, duration ms, outcome, provider), their created_at set after."""
    (message,) = sent_messages(1)
    now = timezone.now()
    rows = DeliveryAttempt.objects.bulk_create(
        DeliveryAttempt(message=message, provider=provider, outcome=outcome, duration_ms=ms)
        for _, ms, outcome, provider in durations)
    for row, (seconds, *_) in zip(rows, durations, strict=True):
        DeliveryAttempt.objects.filter(pk=row.pk).update(created_at=now - timedelta(seconds=seconds))


def _rounded(ms: int) -> int:
    """A duration to two significant digits, upwards (exact under 100 ms)."""
    if ms < 100:
        return ms
    step = 10 ** (len(str(ms)) - 2)
    return math.ceil(ms / step) * step


def test_provider_health_equals_a_plain_recount_cold_and_warm():
    # 300 calls over the last 14 minutes (2 of 3 accepted) with durations 1..3,000 ms, a call
    # 20 minutes ago (outside), and the sandbox's (never counted).
    calls = [(5 + i * 2, 1 + (i * 37) % 3000, "accepted" if i % 3 else "transient", "sendgrid")
             for i in range(300)]
    _attempts([*calls, (1200, 5, "transient", "sendgrid"), (60, 7, "accepted", SANDBOX_PROVIDER)])
    durations = sorted(_rounded(ms) for _, ms, _, _ in calls)
    expected_p95 = durations[math.ceil(0.95 * len(durations)) - 1]  # nearest rank
    for _ in ("cold", "warm"):
        health = {row["provider"]: row for row in provider_health()}
        assert SANDBOX_PROVIDER not in health
        assert (health["sendgrid"]["attempts"], health["sendgrid"]["failed"]) == (300, 100)
        assert health["sendgrid"]["latency_p95_ms"] == expected_p95


def test_a_duration_is_read_to_two_significant_digits():
    assert [_rounded(ms) for ms in (0, 99, 100, 101, 123, 999, 1000, 1001, 45_678)] == [
        0, 99, 100, 110, 130, 1000, 1000, 1100, 46_000]
    _attempts([(10, ms, "accepted", "smtp") for ms in (0, 99, 100, 101, 123, 999, 1000, 1001, 45_678)])
    health = {row["provider"]: row for row in provider_health()}
    calls = {f"smtp ms<={_rounded(ms)}": 1 for ms in (0, 99, 100, 123, 999, 1001, 45_678)}
    calls["smtp ms<=110"], calls["smtp ms<=1000"] = 1, 2
    assert health["smtp"]["latency_p95_ms"] == latency_percentile(calls, "smtp", 0.95) == 46_000.0
    assert latency_percentile(calls, "smtp", 0.5) == 130 and latency_percentile({}, "smtp", 0.95) is None


# --- the open minutes: counted where the rows are written (core/live_counts.py) ------------------


def _current_minutes(series: str) -> dict[str, int]:
    """The live counts of the current and the previous minute, added up (a minute may turn)."""
    now = minute_of(timezone.now())
    live = live_counts_read(series, [now - timedelta(minutes=1), now]) or {}
    return summed(live)


@pytest.fixture
def sendgrid(settings) -> Iterator[FakeSendGrid]:
    """The only provider: a fake SendGrid on 127.0.0.1."""
    with FakeSendGrid() as fake:
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        settings.SENDGRID_API_URL, settings.SENDGRID_API_KEY = fake.url, "test-sendgrid-key"
        yield fake


@pytest.mark.usefixtures("sendgrid")
def test_the_send_path_counts_sends_and_provider_calls_live(django_capture_on_commit_callbacks):
    version = template_version()
    one = email_message(version=version, priority=1)
    batch = [email_message(version=version, priority=2) for _ in range(3)]
    test_key = email_message(version=version, priority=2, key_type=KeyType.TEST)  # the sandbox's
    with django_capture_on_commit_callbacks(execute=True):
        send_batch.apply(args=([one.id], 1), task_id=uuid.uuid4().hex).get()  # the lean P1 path
        send_batch.apply(args=([m.id for m in batch] + [test_key.id], 2), task_id=uuid.uuid4().hex).get()
    assert EmailMessage.objects.filter(status="SENT").count() == 5
    assert _current_minutes(live_counts.SENDS) == {"high": 1, "normal": 3}
    calls = _current_minutes(live_counts.PROVIDER_CALLS)
    assert (calls["sendgrid attempts"], calls.get("sendgrid failed", 0)) == (4, 0)
    assert sum(n for name, n in calls.items() if name.startswith("sendgrid ms<=")) == 4
    assert not any(name.startswith(SANDBOX_PROVIDER) for name in calls)


def test_stored_webhook_events_are_counted_live(django_capture_on_commit_callbacks):
    messages = sent_messages(2)
    events = [event(messages[0], EventType.DELIVERED), event(messages[1], EventType.DELIVERED),
              event(messages[0], EventType.OPENED), event(None, EventType.BOUNCED, bounce="hard"),
              event(messages[1], EventType.DELIVERED, provider=SANDBOX_PROVIDER)]
    with django_capture_on_commit_callbacks(execute=True):
        events_process(events=events)
        events_process(events=events[:2])  # an ESP's repeat: stored once, counted once
    assert _current_minutes(live_counts.EVENTS) == {
        "delivered": 2, "opened": 1, "bounced": 1, live_counts.UNKNOWN_MESSAGE: 1}


def test_a_window_whose_minutes_are_kept_or_live_makes_no_query(django_capture_on_commit_callbacks):
    for _ in range(3):  # the minute must not turn between the live count and the read
        now = minute_of(timezone.now()) + timedelta(seconds=45)  # one open minute: the current one
        series_keep(SENDS, now=now)
        with django_capture_on_commit_callbacks(execute=True):
            live_counts_add(live_counts.SENDS, {"critical": 2, "low": 5})
        with CaptureQueriesContext(connection) as captured:
            window = series_window(SENDS, now=now)
        if minute_of(timezone.now()) + timedelta(seconds=45) == now:
            break
    assert captured.captured_queries == []
    assert window[minute_of(now)] == {"critical": 2, "high": 0, "normal": 0, "low": 5}
    assert summed(window) == {"critical": 2, "high": 0, "normal": 0, "low": 5}


def test_the_sql_and_the_python_duration_buckets_agree():
    durations = [0, 1, 9, 10, 99, 100, 101, 109, 110, 111, 999, 1000, 1001, 1999, 2000, 12_345, 99_999,
                 100_000, 3_600_000]
    _attempts([(10, ms, "accepted", "mailgun") for ms in durations])
    counted = summed(provider_calls_per_minute(timezone.now() - timedelta(minutes=2)))
    assert counted == provider_call_counts("mailgun", [(True, ms) for ms in durations])
