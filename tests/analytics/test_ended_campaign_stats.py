"""The statistics of an ended campaign read its stored row counts (decision 141): a settled
campaign's messages are counted once, then again only when the counts come due (a quarter of the
time since its end, at least a minute, at most an hour); a campaign still sending, one with rows
in flight and one whose rows may be gone are counted on every request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.models import EndedCampaignCounts
from analytics.selectors.campaign_stats import campaign_stats
from analytics.services.ended_campaigns import ended_campaign_counts_refresh, ended_campaign_row_counts
from campaigns.models import Campaign
from delivery.models import EmailMessage
from tests.feedback.helpers import campaign, sent_messages

pytestmark = pytest.mark.django_db
MESSAGES = EmailMessage._meta.db_table


def _ended(minutes_ago: float = 30, **fields) -> Campaign:
    return campaign(status=Campaign.Status.COMPLETED,
                    completed_at=timezone.now() - timedelta(minutes=minutes_ago), **fields)


def _unsent(count: int, c: Campaign, status: str) -> list[EmailMessage]:
    rows = sent_messages(count, campaign_obj=c, status=status)
    EmailMessage.objects.filter(pk__in=[m.pk for m in rows]).update(sent_at=None)
    return rows


def _stats(api, c: Campaign) -> tuple[dict, list[str]]:
    """The stats body and the queries of the messages table it made."""
    with CaptureQueriesContext(connection) as captured:
        response = api.get(f"/api/v1/campaigns/{c.id}/stats")
    assert response.status_code == 200, response.content
    return response.json(), [q["sql"] for q in captured.captured_queries if MESSAGES in q["sql"]]


def _without_count_time(body: dict) -> dict:
    return {key: value for key, value in body.items() if key != "rows_counted_at"}


def test_a_settled_campaign_is_counted_once_then_read_from_its_stored_counts(api):
    done = _ended()
    sent_messages(3, campaign_obj=done)
    _unsent(2, done, "FAILED")
    first, counted = _stats(api, done)
    assert counted and first["counts"]["sent"] == 3 and first["counts"]["failed"] == 2
    assert first["providers"]["sendgrid"]["sent"] == 3
    assert sum(point.get("sent", 0) for point in first["series"]["points"]) == 3

    again, counted_again = _stats(api, done)
    assert counted_again == []
    assert again == first  # the same counts, series and count time
    stored = EndedCampaignCounts.objects.get(campaign_id=done.id)
    assert (stored.by_status, stored.sent_by_provider) == ({"SENT": 3, "FAILED": 2}, {"sendgrid": 3})


def test_the_stored_counts_are_recounted_once_due():
    now = timezone.now()
    done = _ended(30)
    failed = _unsent(2, done, "FAILED")
    assert ended_campaign_row_counts(campaign=done, now=now).by_status == {"FAILED": 2}
    # an operator requeued one and it was sent
    EmailMessage.objects.filter(pk=failed[0].pk).update(status="SENT", sent_at=now)
    # 34 min after the end the counts (4 min old) are not due (a quarter: 8.5 min) ...
    assert ended_campaign_row_counts(campaign=done, now=now + timedelta(minutes=4)).by_status == {"FAILED": 2}
    # ... 42 min after, counts 12 min old are (a quarter: 10.5 min)
    later = ended_campaign_row_counts(campaign=done, now=now + timedelta(minutes=12))
    assert (later.by_status, later.sent) == ({"FAILED": 1, "SENT": 1}, 1)
    assert EndedCampaignCounts.objects.get(campaign_id=done.id).counted_at == now + timedelta(minutes=12)


def test_a_campaign_with_rows_in_flight_is_counted_on_every_request(api):
    done = _ended()
    sent_messages(2, campaign_obj=done)
    unsure = _unsent(1, done, "AMBIGUOUS")
    ended_campaign_counts_refresh()  # the dashboard's counts: stored, though not settled
    assert EndedCampaignCounts.objects.get(campaign_id=done.id).by_status == {"SENT": 2, "AMBIGUOUS": 1}
    body, counted = _stats(api, done)
    assert counted and body["counts"]["sent"] == 2
    # reconciled from the provider's answer: the next request sees it at once
    EmailMessage.objects.filter(pk=unsure[0].pk).update(status="SENT", sent_at=timezone.now())
    body, counted = _stats(api, done)
    assert counted and body["counts"]["sent"] == 3
    # settled now: stored, then read
    assert _stats(api, done)[1] == []


def test_a_sending_campaign_and_one_whose_rows_may_be_gone_are_counted_on_every_request(api):
    sending = campaign()
    sent_messages(2, campaign_obj=sending)
    old = _ended(60 * 24)
    Campaign.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=120))
    old.refresh_from_db()
    sent_messages(2, campaign_obj=old)
    for subject in (sending, old, sending, old):
        body, counted = _stats(api, subject)
        assert counted, subject.status
    assert body["counts_source"] == "facts"
    assert not EndedCampaignCounts.objects.filter(campaign_id__in=[sending.id, old.id]).exists()


def test_the_counts_the_beat_stored_answer_the_stats_as_a_count_would(api):
    done = _ended(5)
    sent_messages(4, campaign_obj=done)
    _unsent(1, done, "SUPPRESSED")
    counted = campaign_stats(campaign=done)
    assert ended_campaign_counts_refresh() == 1
    body, queries = _stats(api, done)
    assert queries == []
    assert _without_count_time(body) == _without_count_time(counted)
    stored = EndedCampaignCounts.objects.get(campaign_id=done.id)
    assert body["rows_counted_at"] == stored.counted_at.isoformat()


def test_counts_stored_per_status_only_are_not_read_by_the_stats(api):
    done = _ended()
    sent_messages(2, campaign_obj=done)
    EndedCampaignCounts.objects.create(campaign_id=done.id, by_status={"SENT": 2}, counted_at=timezone.now())
    body, counted = _stats(api, done)
    assert counted and body["providers"]["sendgrid"]["sent"] == 2
    assert EndedCampaignCounts.objects.get(campaign_id=done.id).sent_by_minute  # now stored whole
