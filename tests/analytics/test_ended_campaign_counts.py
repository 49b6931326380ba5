"""The counts of the campaigns the dashboard shows as ended come from the beat's stored counts
(decision 140): a refresh counts no ended campaign's rows, even with Django's caches off, and the
stored counts follow the rows as they come due (a quarter of the time since the end, at least a
minute, at most an hour)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from analytics.models import EndedCampaignCounts
from analytics.selectors.campaign_stats import campaigns_current
from analytics.services.ended_campaigns import ended_campaign_counts_refresh, recount_interval
from analytics.tasks import count_ended_campaigns
from campaigns.models import Campaign
from clients.key_types import KeyType
from delivery.models import EmailMessage
from tests.feedback.helpers import campaign, sent_messages

pytestmark = pytest.mark.django_db
CACHES_OFF = override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}})
MESSAGES = EmailMessage._meta.db_table


def _ended(minutes_ago: float, **fields) -> Campaign:
    return campaign(status=Campaign.Status.COMPLETED,
                    completed_at=timezone.now() - timedelta(minutes=minutes_ago), **fields)


def _shown_counts() -> dict[int, dict[str, int]]:
    with CACHES_OFF:
        return {row["id"]: row["counts"] for row in campaigns_current(now=timezone.now())}


def _stored() -> dict[int, dict[str, int]]:
    return dict(EndedCampaignCounts.objects.values_list("campaign_id", "by_status"))


def test_a_refresh_reads_the_stored_counts_and_counts_no_ended_campaign():
    done = _ended(30)
    sent_messages(3, campaign_obj=done)
    sent_messages(2, campaign_obj=done, status="FAILED")
    counted_before = _shown_counts()[done.id]  # not counted by the beat yet: the rows are
    assert counted_before == {"sent": 3, "failed": 2, "suppressed": 0, "cancelled": 0}

    assert count_ended_campaigns() == 1
    assert _stored() == {done.id: {"SENT": 3, "FAILED": 2}}
    with CaptureQueriesContext(connection) as captured:
        assert _shown_counts()[done.id] == counted_before
    assert not [q["sql"] for q in captured.captured_queries if MESSAGES in q["sql"]]


def test_the_counts_follow_the_rows_as_they_come_due():
    now = timezone.now()
    cancelled = campaign(status=Campaign.Status.CANCELLED, completed_at=now - timedelta(minutes=20))
    sent_messages(2, campaign_obj=cancelled)
    rows = sent_messages(4, campaign_obj=cancelled, status="QUEUED")
    assert ended_campaign_counts_refresh(now=now) == 1
    # the cancel task marks the rest afterwards
    EmailMessage.objects.filter(id__in=[m.id for m in rows]).update(status="CANCELLED")
    # 24 min after the end, counts 4 min old are not due (a quarter: 6 min); 28 min after, 8 min old are
    assert ended_campaign_counts_refresh(now=now + timedelta(minutes=4)) == 0
    assert _stored()[cancelled.id] == {"SENT": 2, "QUEUED": 4}
    assert ended_campaign_counts_refresh(now=now + timedelta(minutes=8)) == 1
    assert _stored()[cancelled.id] == {"SENT": 2, "CANCELLED": 4}
    assert _shown_counts()[cancelled.id] == {"sent": 2, "failed": 0, "suppressed": 0, "cancelled": 4}


def test_recounts_come_often_just_after_the_end_and_at_most_hourly_later():
    assert recount_interval(timedelta(seconds=30)) == timedelta(minutes=1)
    assert recount_interval(timedelta(hours=2)) == timedelta(minutes=30)
    assert recount_interval(timedelta(hours=20)) == timedelta(hours=1)


def test_only_the_shown_campaigns_are_counted_and_the_others_forgotten_once_due(settings):
    now = timezone.now()
    shown = _ended(10)
    _ended(10, key_type=KeyType.TEST)  # never on the dashboard (issue 27)
    campaign()  # still sending: counted live by the dashboard
    left = _ended(60 * 23)
    assert ended_campaign_counts_refresh(now=now) == 2
    assert set(_stored()) == {shown.id, left.id}
    Campaign.objects.filter(pk=left.pk).update(completed_at=now - timedelta(hours=25))
    # no longer shown: kept while the stats may read them (decision 141), forgotten an hour on
    ended_campaign_counts_refresh(now=now + timedelta(minutes=59))
    assert set(_stored()) == {shown.id, left.id}
    ended_campaign_counts_refresh(now=now + timedelta(minutes=61))
    assert set(_stored()) == {shown.id}


def test_a_burst_of_ended_campaigns_is_counted_never_counted_first_then_oldest(settings):
    now = timezone.now()
    first, second, third = _ended(30), _ended(30), _ended(30)
    assert ended_campaign_counts_refresh(now=now, limit=2) == 2
    assert set(_stored()) == {first.id, second.id}
    EndedCampaignCounts.objects.filter(campaign_id=second.id).update(counted_at=now - timedelta(hours=1))
    assert ended_campaign_counts_refresh(now=now, limit=2) == 2  # third (never), then second (oldest)
    assert EndedCampaignCounts.objects.get(campaign_id=third.id).counted_at == now
    assert EndedCampaignCounts.objects.get(campaign_id=second.id).counted_at == now


def test_the_beat_counts_every_minute_on_the_maintenance_queue():
    task = PeriodicTask.objects.get(task="analytics.count_ended_campaigns")
    assert (task.queue, task.interval.every, task.interval.period, task.enabled) == (
        "maintenance", 60, "seconds", True)
