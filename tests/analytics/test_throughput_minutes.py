"""The dashboard's throughput keeps settled minutes in Redis (decision 135): the same figures as a
plain recount, a repeated call counts only the open minutes, and without Redis it recounts."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from analytics.selectors.kept_minutes import SETTLE as THROUGHPUT_SETTLE
from analytics.selectors.queues import throughput_last_hour
from analytics.tasks import keep_throughput_minutes
from clients.key_types import KeyType
from core.live_counts import minute_of
from core.priorities import Priority
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from testkit.ports import free_port
from tests.feedback.helpers import sent_messages

pytestmark = pytest.mark.django_db

# (seconds ago, priority, key type): over the whole hour, both sides of its first minute, all four
# priorities, test-key rows among them (never counted), several rows in some minutes.
SPREAD = [
    (seconds, Priority(i % 4), KeyType.TEST if i % 5 == 0 else KeyType.LIVE)
    for i, seconds in enumerate(range(5, 3900, 37))
]


def _sends(spread: list[tuple[int, Priority, str]]) -> list[tuple[datetime, Priority, str]]:
    """The rows, written: each one's sent_at, priority and key type set after the fact."""
    now = timezone.now()
    rows = []
    for message, (seconds, priority, key_type) in zip(sent_messages(len(spread)), spread, strict=True):
        sent_at = now - timedelta(seconds=seconds)
        EmailMessage.objects.filter(pk=message.pk).update(
            sent_at=sent_at, priority=priority, key_type=key_type)
        rows.append((sent_at, priority, key_type))
    return rows


def _recount(rows: list[tuple[datetime, Priority, str]], *, first: datetime) -> dict[str, Counter]:
    """The plain recount of the result's own window: live rows from its first minute, by minute."""
    per_minute: dict[str, Counter] = {}
    for sent_at, priority, key_type in rows:
        if sent_at >= first and key_type != KeyType.TEST:
            per_minute.setdefault(minute_of(sent_at).isoformat(), Counter())[priority.label] += 1
    return per_minute


def _assert_recounted(result: dict, rows: list[tuple[datetime, Priority, str]]) -> None:
    points = result["per_minute"]
    first = datetime.fromisoformat(points[0]["t"])
    expected = _recount(rows, first=first)
    labels = [p.label for p in Priority]
    assert len(points) == 61  # the minute of now - 1 h .. the current minute
    for point in points:
        assert {label: point[label] for label in labels} == {
            label: expected.get(point["t"], Counter())[label] for label in labels}, point["t"]
    totals = sum(expected.values(), Counter())
    assert result["per_priority"] == {label: totals[label] for label in labels}


def _minute_key(minute: datetime) -> str:
    return redis_key("analytics", "throughput", int(minute.timestamp()))


def test_equals_a_plain_recount_cold_and_warm():
    rows = _sends(SPREAD)
    assert sum(1 for _, _, key_type in rows if key_type == KeyType.TEST) >= 20
    cold = throughput_last_hour()
    _assert_recounted(cold, rows)
    warm = throughput_last_hour()  # the settled minutes from Redis now
    _assert_recounted(warm, rows)
    assert sum(cold["per_priority"].values()) > 60


def test_every_settled_minute_is_kept_zeros_too():
    (message,) = sent_messages(1)
    ten_ago = timezone.now() - timedelta(minutes=10)
    EmailMessage.objects.filter(pk=message.pk).update(sent_at=ten_ago)
    now = timezone.now()
    throughput_last_hour()
    first = minute_of(now - timedelta(hours=1))
    settled = [first + timedelta(minutes=i) for i in range(55)]  # all ended > THROUGHPUT_SETTLE before `now`
    values = get_redis().mget([_minute_key(m) for m in settled])
    assert all(value is not None for value in values)
    kept = dict(zip(settled, values, strict=True))
    assert b'"normal": 1' in kept[minute_of(ten_ago)]
    assert kept[first] == b'{"critical": 0, "high": 0, "normal": 0, "low": 0}'
    open_minute = get_redis().get(_minute_key(minute_of(timezone.now())))
    assert open_minute is None  # the current minute is never kept


def test_a_repeated_call_counts_only_from_the_open_minutes():
    sent_messages(3)
    throughput_last_hour()
    # Written into a settled minute after it was kept: not counted again (no send does this,
    # sent_at is written once, when the row is marked SENT); a send of the open minute is.
    (late,) = sent_messages(1)
    EmailMessage.objects.filter(pk=late.pk).update(sent_at=timezone.now() - timedelta(minutes=10))
    sent_messages(2)
    before = timezone.now()
    with CaptureQueriesContext(connection) as captured:
        result = throughput_last_hour()
    assert result["per_priority"]["normal"] == 5
    (query,) = [q["sql"] for q in captured.captured_queries if "sent_at" in q["sql"]]
    (bound,) = re.findall(r"\"sent_at\" >= '([^']+)'", query)
    since = datetime.fromisoformat(bound)
    # Reads from the first minute not settled (within a minute past THROUGHPUT_SETTLE), not the hour.
    assert before - THROUGHPUT_SETTLE - timedelta(minutes=1) <= since <= before - THROUGHPUT_SETTLE


def _first_bound(captured: CaptureQueriesContext) -> datetime:
    (query,) = [q["sql"] for q in captured.captured_queries if "sent_at" in q["sql"]]
    (bound,) = re.findall(r"\"sent_at\" >= '([^']+)'", query)
    return datetime.fromisoformat(bound)


def test_the_beat_keeps_the_minutes_so_the_first_dashboard_counts_only_the_open_ones():
    """analytics.keep_throughput_minutes, every minute on the maintenance queue: after it, the
    first dashboard of the hour reads the kept minutes and counts only the open ones."""
    task = PeriodicTask.objects.get(task="analytics.keep_throughput_minutes")
    assert (task.queue, task.interval.every, task.interval.period, task.enabled) == (
        "maintenance", 60, "seconds", True)
    rows = _sends(SPREAD)
    began = timezone.now()
    with CaptureQueriesContext(connection) as beat:
        kept = keep_throughput_minutes()
    with CaptureQueriesContext(connection) as captured:
        result = throughput_last_hour()
    _assert_recounted(result, rows)
    assert began - THROUGHPUT_SETTLE - timedelta(minutes=1) <= _first_bound(captured)
    # Every live series' settled minutes (59 or 60 of the hour's 61, 14 or 15 of the quarter's
    # 16), each counted by one query that stops where the open minutes begin.
    assert kept["throughput"] in (59, 60) and kept["events"] in (59, 60)
    assert kept["provider_calls"] in (14, 15)
    (sends_query,) = [q["sql"] for q in beat.captured_queries if "sent_at" in q["sql"]]
    (until,) = re.findall(r"\"sent_at\" < '([^']+)'", sends_query)
    assert datetime.fromisoformat(until) <= began - THROUGHPUT_SETTLE + timedelta(seconds=1)
    assert keep_throughput_minutes()["throughput"] <= 1  # kept already (a minute may turn)


def test_a_malformed_kept_minute_is_counted_again():
    (message,) = sent_messages(1)
    ten_ago = timezone.now() - timedelta(minutes=10)
    EmailMessage.objects.filter(pk=message.pk).update(sent_at=ten_ago)
    get_redis().set(_minute_key(minute_of(ten_ago)), b"not json", ex=60)
    assert throughput_last_hour()["per_priority"]["normal"] == 1


@pytest.fixture
def redis_down(settings):
    """The shared client pointed at a port where nothing listens: a real refused connection."""
    get_redis.cache_clear()
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    yield
    get_redis.cache_clear()


def test_without_redis_the_whole_hour_is_counted(redis_down):
    rows = _sends(SPREAD[:40])
    _assert_recounted(throughput_last_hour(), rows)
    _assert_recounted(throughput_last_hour(), rows)
