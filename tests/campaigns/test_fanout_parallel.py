"""The parallel fan-out (decision 58): disjoint contact-id ranges, one connection each, every
eligible contact written exactly once, each range resuming from its own cursor."""

from __future__ import annotations

import pytest

from audience.models import Contact, Suppression
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from clients.services import service_create
from delivery.models import EmailMessage
from tests import factories
from tests.campaigns.helpers import contacts_create, fanout_marks_replace

pytestmark = pytest.mark.django_db(transaction=True)  # each range writes on its own connection


@pytest.fixture
def parallel(settings) -> None:
    settings.NOTIFIER_FANOUT_PARALLEL_MIN = 1
    settings.NOTIFIER_FANOUT_CONNECTIONS = 3


@pytest.fixture
def campaign(purged_queues, parallel) -> Campaign:
    """2,300 contacts of the owner, most of them in the first third of the id space: another
    client's 4,000 contacts sit between the owner's first 2,000 and last 300."""
    other = service_create(name="other-tenant")[0]
    contacts_create(2000, prefix="a")
    contacts_create(4000, prefix="o", client_id=other.pk)
    contacts_create(300, prefix="z")
    Suppression.objects.create(email="a7@example.com", reason="hard_bounce")
    Contact.objects.filter(email="z5@example.com").update(subscribed=False)
    everyone = {"conditions": [{"attribute": "n", "op": "gte", "value": 0}]}
    return Campaign.objects.create(
        name="p", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "segment", "definition": everyone},
    )


def _contacts_written(campaign: Campaign) -> list[int]:
    return list(EmailMessage.objects.filter(campaign=campaign).values_list("contact_id", flat=True))


def _eligible() -> set[int]:
    owner = Contact.objects.filter(client=factories.owner(), subscribed=True).exclude(email="a7@example.com")
    return set(owner.values_list("id", flat=True))


def test_every_contact_is_written_once_over_unevenly_filled_ranges(campaign):
    report = campaign_fanout(campaign_id=campaign.pk)
    written = _contacts_written(campaign)
    assert len(written) == len(set(written)) == 2298 == report.inserted
    assert set(written) == _eligible()
    assert (report.excluded, report.finished) == (2, True)
    campaign.refresh_from_db()
    assert campaign.fanout_done and campaign.excluded_count == 2 and campaign.audience_size == 2300
    assert len(campaign.fanout_ranges) == 3
    # Each range stopped inside its own bounds: none wrote a contact of another.
    bounds = [(cursor_end, upper) for cursor_end, upper in campaign.fanout_ranges]
    assert all(cursor <= upper for cursor, upper in bounds)
    assert report.tasks >= 23  # at least one task per 100 rows of each chunk


def test_a_fanout_that_died_mid_range_resumes_each_range_without_duplicates(campaign):
    campaign_fanout(campaign_id=campaign.pk)
    campaign.refresh_from_db()
    first, second, last = campaign.fanout_ranges
    # As if it died with the first range half written (its first chunk not yet published) and
    # the last one not started: the rows past each range's committed cursor were never written.
    middle = Contact.objects.get(email="a999@example.com").pk
    rows = EmailMessage.objects.filter(campaign=campaign)
    rows.filter(contact_id__gt=middle, contact_id__lte=first[1]).delete()
    rows.filter(contact_id__gt=second[1]).delete()
    died = [[middle, first[1]], second, [second[1], last[1]]]
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False, fanout_ranges=died, excluded_count=1)
    fanout_marks_replace(campaign.pk, {"1": second[0]})  # only the middle range's publishing was recorded

    report = campaign_fanout(campaign_id=campaign.pk)

    written = _contacts_written(campaign)
    assert len(written) == len(set(written)) == 2298
    assert set(written) == _eligible()
    assert (report.inserted, report.republished, report.finished) == (1000 + 299, 999, True)
    campaign.refresh_from_db()
    assert campaign.excluded_count == 2  # the last range's unsubscribed contact, counted again


def test_a_restarted_range_publishes_again_only_past_its_own_mark(campaign):
    from campaigns.services.fanout_marks import fanout_published_marks

    campaign_fanout(campaign_id=campaign.pk)
    campaign.refresh_from_db()
    marks = fanout_published_marks(campaign.pk)
    # Each range marks its own progress; the middle one holds only another tenant's contacts,
    # published nothing and has no mark (read as its lower bound).
    assert set(marks) == {"0", "2"}
    # Died with every chunk committed; the first range's publishing had reached a499 only.
    a499 = Contact.objects.get(email="a499@example.com").pk
    fanout_marks_replace(campaign.pk, {**marks, "0": a499})
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False)
    report = campaign_fanout(campaign_id=campaign.pk)
    first_upper = campaign.fanout_ranges[0][1]
    rows = EmailMessage.objects.filter(campaign=campaign)
    expected = rows.filter(contact_id__gt=a499, contact_id__lte=first_upper)
    assert report.republished == expected.count() == 1500  # a500..a1999
    assert (report.inserted, report.finished) == (0, True)


def test_a_small_audience_stays_on_one_connection(purged_queues, parallel, settings):
    settings.NOTIFIER_FANOUT_PARALLEL_MIN = 10_000
    contacts_create(50, prefix="s")
    campaign = Campaign.objects.create(
        name="s", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "segment",
                  "definition": {"conditions": [{"attribute": "n", "op": "gte", "value": 0}]}},
    )
    assert campaign_fanout(campaign_id=campaign.pk).inserted == 50
    campaign.refresh_from_db()
    assert campaign.fanout_ranges == [] and campaign.fanout_cursor > 0
