"""GET /api/v1/messages (the message log) and GET /api/v1/messages/{id}/events (issue 29)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audience.models import Contact
from campaigns.models import Campaign
from clients.services import service_create
from delivery.models import AmbiguityRecord, DeliveryAttempt, EmailMessage
from feedback.models import EmailEvent
from tests import factories
from transactional.message_log import LogCursor

pytestmark = pytest.mark.django_db
PATH = "/api/v1/messages"


@pytest.fixture
def make(api_key):
    """A message of the key's service, `minutes` ago (newest last when called in order)."""
    owner = factories.owner()
    version = factories.template_version(client=owner, name="otp")
    now = timezone.now()

    def _make(minutes: float = 0, **fields) -> EmailMessage:
        message = factories.email_message(version=version, client=owner, **fields)
        EmailMessage.objects.filter(pk=message.pk).update(created_at=now - timedelta(minutes=minutes))
        message.refresh_from_db()
        return message
    return _make


def _ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def _fields(response) -> list[str]:
    assert response.status_code == 400, response.content
    return sorted(response.json()["error"]["fields"])


def test_newest_first_and_only_the_callers_service(api, make):
    older, newer = make(minutes=5), make(minutes=1)
    stranger, _key = service_create(name="stranger")
    factories.email_message(client=stranger, version=factories.template_version(client=stranger))
    assert _ids(api.get(PATH)) == [newer.pk, older.pk]
    row = api.get(PATH).json()["results"][0]
    assert row["template"] == "otp" and row["recipient"] == newer.recipient and row["campaign"] is None


def test_recipient_is_exact_any_case_and_finds_campaign_rows_through_the_contact(api, make):
    mine = make(recipient="Ada@Example.com")
    make(recipient="ada@example.org")
    contact = Contact.objects.create(client=factories.owner(), email="ada@example.com")
    fanned = make(recipient="ada@example.com", contact=contact)
    assert _ids(api.get(PATH, {"recipient": "ADA@example.COM"})) == [fanned.pk, mine.pk]


@pytest.mark.parametrize(("field", "value", "match", "other"), [
    ("status", "BOUNCED", {"status": "BOUNCED"}, {"status": "SENT"}),
    ("stream", "broadcast", {"stream": "broadcast"}, {"stream": "transactional"}),
])
def test_status_and_stream(api, make, field, value, match, other):
    hit = make(**match)
    make(**other)
    assert _ids(api.get(PATH, {field: value})) == [hit.pk]


def test_template_by_name_or_id(api, make):
    hit = make()
    other = factories.template_version(client=factories.owner(), name="receipt")
    factories.email_message(version=other, client=factories.owner())
    assert _ids(api.get(PATH, {"template": "otp"})) == [hit.pk]
    assert _ids(api.get(PATH, {"template": str(hit.template_version.template_id)})) == [hit.pk]


def test_campaign(api, make):
    owner = factories.owner()
    campaign = Campaign.objects.create(name="c1", client=owner,
                                       template_version=factories.template_version(client=owner, name="camp"))
    hit = make(campaign=campaign)
    make()
    assert _ids(api.get(PATH, {"campaign": campaign.pk})) == [hit.pk]


def test_a_campaigns_pages_merge_its_statuses_newest_first(api, make):
    """Read one range per status (decision 116), the pages are still one newest-first walk."""
    owner = factories.owner()
    campaign = Campaign.objects.create(name="c2", client=owner,
                                       template_version=factories.template_version(client=owner, name="camp"))
    statuses = ["SENT", "QUEUED", "FAILED", "SENT", "SUPPRESSED", "SENT", "QUEUED"]
    made = [make(minutes=50 - i, campaign=campaign, status=status) for i, status in enumerate(statuses * 2)]
    make(minutes=0)  # newer, of no campaign
    EmailMessage.objects.filter(pk=made[3].pk).update(created_at=made[4].created_at)  # a tie: id decides
    seen, url = [], f"{PATH}?campaign={campaign.pk}&limit=3"
    while url:
        page = api.get(url)
        seen += _ids(page)
        url = page.json()["next"]
    expected = sorted(made, key=lambda m: (EmailMessage.objects.get(pk=m.pk).created_at, m.pk), reverse=True)
    assert seen == [m.pk for m in expected]
    failed = _ids(api.get(PATH, {"campaign": campaign.pk, "status": "FAILED"}))
    assert failed == [m.pk for m in expected if m.status == "FAILED"]


def test_time_range_after_inclusive_before_exclusive(api, make):
    old, mid, new = make(minutes=30), make(minutes=20), make(minutes=10)
    query = {"created_after": mid.created_at.isoformat(), "created_before": new.created_at.isoformat()}
    assert _ids(api.get(PATH, query)) == [mid.pk]
    assert _ids(api.get(PATH, {"created_before": mid.created_at.isoformat()})) == [old.pk]


def test_metadata_string_number_and_bool_values(api, make):
    order = make(metadata={"order_id": "A-1", "attempt": 2, "vip": True})
    make(metadata={"order_id": "A-2", "attempt": "2"})
    make()
    assert _ids(api.get(PATH, {"metadata[order_id]": "A-1"})) == [order.pk]
    assert len(_ids(api.get(PATH, {"metadata[attempt]": "2"}))) == 2
    assert _ids(api.get(PATH, {"metadata[vip]": "true"})) == [order.pk]
    assert _ids(api.get(PATH, {"metadata[order_id]": "A-1", "metadata[attempt]": "3"})) == []


def test_filters_combine(api, make):
    hit = make(status="SENT", metadata={"k": "v"}, recipient="x@example.com")
    make(status="BOUNCED", metadata={"k": "v"}, recipient="x@example.com")
    make(status="SENT", metadata={"k": "w"}, recipient="x@example.com")
    query = {"status": "SENT", "metadata[k]": "v", "recipient": "x@example.com", "template": "otp"}
    assert _ids(api.get(PATH, query)) == [hit.pk]


def test_pages_neither_skip_nor_repeat_while_messages_arrive(api, make):
    made = [make(minutes=100 - i) for i in range(23)]
    # Two rows of one instant: the id orders them, the cursor keeps both.
    EmailMessage.objects.filter(pk=made[5].pk).update(created_at=made[6].created_at)
    seen, url = [], f"{PATH}?limit=5"
    while url:
        page = api.get(url)
        seen += _ids(page)
        make(minutes=0)  # a new message arrives between pages
        url = page.json()["next"]
    expected = sorted(made, key=lambda m: (EmailMessage.objects.get(pk=m.pk).created_at, m.pk), reverse=True)
    assert seen == [m.pk for m in expected]


def test_the_limit_bounds_a_page(api, make):
    for _ in range(3):
        make()
    response = api.get(PATH, {"limit": 2})
    assert len(_ids(response)) == 2 and response.json()["next"]
    assert api.get(PATH, {"limit": 3}).json()["next"] is None


@pytest.mark.parametrize(("query", "fields"), [
    ({"status": "LOST"}, ["status"]),
    ({"stream": "x"}, ["stream"]),
    ({"recipient": "not-an-address"}, ["recipient"]),
    ({"template": "nope"}, ["template"]),
    ({"campaign": "abc"}, ["campaign"]),
    ({"created_after": "yesterday"}, ["created_after"]),
    ({"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}, ["created_before"]),
    ({"limit": 0}, ["limit"]),
    ({"limit": 501}, ["limit"]),
    ({"cursor": "garbage!"}, ["cursor"]),
    ({"recepient": "a@example.com"}, ["recepient"]),
    ({"metadata[bad key]": "v"}, ["metadata[bad key]"]),
    ({"metadata[k]": "v" * 501}, ["metadata[k]"]),
    ({f"metadata[k{i}]": "v" for i in range(21)}, ["metadata"]),
])
def test_bad_values_are_a_400_naming_the_parameter(api, make, query, fields):
    assert _fields(api.get(PATH, query)) == fields


def test_another_services_template_is_unknown(api, make):
    stranger, _key = service_create(name="stranger")
    theirs = factories.template_version(client=stranger, name="theirs")
    assert _fields(api.get(PATH, {"template": str(theirs.template_id)})) == ["template"]


def test_cursor_round_trips():
    cursor = LogCursor(timezone.now(), 42)
    assert LogCursor.decode(cursor.encode()) == cursor


def test_events_tell_the_history_from_what_is_stored(api, make):
    message = make(status="BOUNCED", provider="ses", sent_at=timezone.now(), bounced_at=timezone.now())
    DeliveryAttempt.objects.create(message=message, provider="ses", outcome="transient", error="timeout",
                                   duration_ms=5000)
    DeliveryAttempt.objects.create(message=message, provider="ses", outcome="accepted", duration_ms=80)
    AmbiguityRecord.objects.create(message_id=message.pk, kind="held", reason="no_answer", provider="ses")
    EmailEvent.objects.create(message=message, provider="ses", provider_event_id="e1", event_type="bounced",
                              bounce_type="hard", occurred_at=timezone.now())
    body = api.get(f"{PATH}/{message.pk}/events").json()
    assert body["id"] == message.pk and body["status"] == "BOUNCED"
    kinds = [(event["type"], event["source"]) for event in body["events"]]
    assert kinds[0] == ("message.accepted", "message")
    assert kinds.count(("message.attempt", "attempt")) == 2
    assert ("message.held", "ambiguity") in kinds and ("message.sent", "message") in kinds
    # The ESP's bounce replaces the row's bounced_at stamp: one bounce, with its type.
    bounces = [event for event in body["events"] if event["type"] == "message.bounced"]
    assert [(b["source"], b["data"]["bounce_type"]) for b in bounces] == [("esp_event", "hard")]
    ats = [event["at"] for event in body["events"]]
    assert ats == sorted(ats)


def test_events_of_another_services_message_are_a_404(api):
    stranger, _key = service_create(name="stranger")
    theirs = factories.email_message(client=stranger, version=factories.template_version(client=stranger))
    assert api.get(f"{PATH}/{theirs.pk}/events").status_code == 404
