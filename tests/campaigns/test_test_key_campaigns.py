"""A test key's campaigns and schedules (issue 27): the fan-out's rows and a recurring run's
campaign inherit the key type they were created with, and the fan-out leaves out the addresses
suppressed in that key type's scope only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audience.models import Suppression
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from campaigns.services.launch import campaign_launch, campaign_launch_detailed
from clients.key_types import KeyType
from delivery.models import EmailMessage
from scheduling.models import Schedule
from scheduling.tasks import run_recurring
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_due_set")]
INLINE = [{"email": "live-gone@y.io"}, {"email": "test-gone@y.io"}, {"email": "both-fine@y.io"}]


def _definition(**schedule) -> dict:
    version = factories.template_version()
    return {"template_id": version.template_id, "priority": "normal",
            "schedule": schedule or {"type": "immediate"},
            "recipients": {"type": "inline", "contacts": INLINE}}


@pytest.mark.parametrize(("key_type", "written"), [
    (KeyType.TEST, {"live-gone@y.io", "both-fine@y.io"}),
    (KeyType.LIVE, {"test-gone@y.io", "both-fine@y.io"}),
])
def test_a_fanout_writes_rows_of_its_campaigns_key_type_past_that_scopes_suppressions(
    purged_queues, key_type, written
):
    Suppression.objects.create(email="live-gone@y.io", reason="hard_bounce")
    Suppression.objects.create(email="test-gone@y.io", reason="hard_bounce", sandbox=True)
    campaign = campaign_launch(definition=_definition(), client_id=factories.owner().pk, key_type=key_type)
    assert campaign.key_type == key_type
    campaign_fanout(campaign_id=campaign.pk)
    rows = EmailMessage.objects.filter(campaign=campaign)
    assert set(rows.values_list("recipient", flat=True)) == written
    assert set(rows.values_list("key_type", flat=True)) == {key_type}


def test_a_recurring_schedule_of_a_test_key_launches_test_campaigns(purged_queues):
    launched = campaign_launch_detailed(
        definition=_definition(type="recurring", cron="0 17 * * 5", timezone="UTC"),
        client_id=factories.owner().pk, key_type=KeyType.TEST)
    schedule = launched.schedule
    assert schedule.key_type == KeyType.TEST
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    run_recurring.apply(args=[schedule.pk])
    assert Campaign.objects.get().key_type == KeyType.TEST


def test_a_test_campaign_scheduled_for_later_is_recorded_as_a_test_schedule(purged_queues):
    send_at = (timezone.now() + timedelta(hours=1)).isoformat()
    campaign = campaign_launch(definition=_definition(type="scheduled", send_at=send_at),
                               client_id=factories.owner().pk, key_type=KeyType.TEST)
    assert Schedule.objects.get(campaign=campaign).key_type == KeyType.TEST
