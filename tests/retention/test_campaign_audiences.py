"""An ended inline campaign's addresses are removed from `Campaign.audience` after its service's
broadcast personal-data retention (issue 30, decision 130): the audience keeps its type,
owner and count, the campaign its counters, statistics, admin page and API answer. A campaign
that may still fan out (queued, scheduled, sending, paused) is never touched; segment and list
audiences are never rewritten. What holds for schedule definitions too (a longer retention, a
deleted service, a dry run, a second run, the due index): test_inline_personal_data.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from delivery.models import EmailMessage
from tests import factories
from tests.retention.helpers import ADDRESSES, CAMPAIGN_AUDIENCES, CS, ended_campaign, expire

pytestmark = pytest.mark.django_db
_scrubbed = CAMPAIGN_AUDIENCES.scrubbed


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@x.io", "pw-ops-123"))
    return client


def test_an_inline_campaign_loses_its_addresses_after_the_retention_and_keeps_every_figure(
        api, staff_client, settings, purged_queues):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    version = factories.template_version()
    launched = api.post("/api/v1/notifications/email", {
        "template_id": version.template_id, "recipients": {"type": "inline", "contacts": [
            {"email": a, "name": "X", "data": {"plan": "pro"}} for a in ADDRESSES]}}, format="json")
    assert launched.status_code == 202, launched.content
    campaign_id = launched.json()["campaign_id"]
    campaign_fanout(campaign_id=campaign_id)
    EmailMessage.objects.filter(campaign_id=campaign_id).update(status="DELIVERED", sent_at=timezone.now())
    ended = timezone.now() - timedelta(days=8)
    Campaign.objects.filter(pk=campaign_id).update(status=CS.COMPLETED, completed_at=ended)
    detail = api.get(f"/api/v1/campaigns/{campaign_id}").json()
    stats = api.get(f"/api/v1/campaigns/{campaign_id}/stats").json()
    assert detail["counters"]["total"] == 3 and detail["personal_data_removed_at"] is None
    before = Campaign.objects.get(pk=campaign_id)

    assert "1 campaign audiences" in expire()

    after = Campaign.objects.get(pk=campaign_id)
    assert after.audience == {"type": "inline", "client_id": before.audience["client_id"], "contacts": [],
                              "count": 3}
    assert _scrubbed(after)
    assert (after.status, after.audience_size, after.excluded_count, after.completed_at) == (
        before.status, 3, before.excluded_count, before.completed_at)
    again = api.get(f"/api/v1/campaigns/{campaign_id}")
    assert again.status_code == 200
    body = again.json()
    assert body.pop("personal_data_removed_at") is not None
    detail.pop("personal_data_removed_at")
    assert body == detail
    assert api.get(f"/api/v1/campaigns/{campaign_id}/stats").json() == stats
    listed = api.get("/api/v1/campaigns").json()["results"]
    assert [row["personal_data_removed_at"] is not None for row in listed] == [True]
    page = staff_client.get(f"/admin/campaigns/campaign/{campaign_id}/change/")
    assert page.status_code == 200 and b"inline: 3 contacts (addresses removed" in page.content
    assert not any(a.encode() in page.content for a in ADDRESSES)


def test_a_campaign_that_may_still_fan_out_is_never_touched(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    waiting = [ended_campaign(400, status=status)
               for status in (CS.DRAFT, CS.SCHEDULED, CS.QUEUED, CS.SENDING, CS.PAUSED)]
    ended = [ended_campaign(2, status=status) for status in (CS.COMPLETED, CS.CANCELLED, CS.FAILED)]
    expire()
    assert [_scrubbed(c) for c in waiting] == [False] * 5
    assert [_scrubbed(c) for c in ended] == [True] * 3
    # Resumed and finished at last: it goes once its own end is past the retention.
    paused = waiting[-1]
    Campaign.objects.filter(pk=paused.pk).update(status=CS.COMPLETED, completed_at=timezone.now())
    expire()
    assert not _scrubbed(paused)
    expire("--as-of", (timezone.now() + timedelta(days=2)).isoformat())
    assert _scrubbed(paused)


def test_segment_and_list_audiences_are_references_and_stay_as_they_were(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    owner = factories.owner().pk
    segment = ended_campaign(30, audience={"type": "segment", "segment_id": 4, "client_id": owner,
                                   "definition": {"conditions": [{"attribute": "plan", "op": "equals",
                                                                  "value": "pro"}]}})
    listed = ended_campaign(30, audience={"type": "list", "list_id": 3, "client_id": owner})
    assert "0 campaign audiences" in expire()
    for c in (segment, listed):
        row = Campaign.objects.get(pk=c.pk)
        assert (row.audience, row.personal_data_removed_at) == (c.audience, None)
