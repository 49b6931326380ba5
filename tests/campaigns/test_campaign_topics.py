"""A campaign names a topic (issue 28, decision 106): POST /api/v1/notifications/email, a one-off
schedule and a recurring definition take `topic` (id or name); the real fan-out skips who left it
(or, for an opt-in topic, takes only who joined it) and who left the broadcast stream; a campaign
of another topic still reaches them. A bad topic is a 400 naming `topic` and writes nothing. The
campaign's statistics count the unsubscribes its mail caused, per topic.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audience.models import ConsentChange, Contact, Segment, Topic
from audience.services.consent import ConsentSubject, broadcast_unsubscribe, topic_subscription_set
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from clients.services import service_create
from consent.tokens import unsubscribe_token
from delivery.models import EmailMessage
from scheduling.models import Schedule
from scheduling.tasks import run_recurring
from tests import factories
from tests.campaigns.helpers import contacts_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_due_set")]
Source = ConsentChange.Source


@pytest.fixture
def template(db):
    return factories.template_version(subject="Hi {{ name }}", html_body="<p>Hi {{ name }}</p>")


@pytest.fixture
def segment(db, purged_queues) -> Segment:
    contacts_create(10)  # user0..user9@example.com
    return Segment.objects.create(client=factories.owner(), name="first ten", definition={
        "conditions": [{"attribute": "n", "op": "lt", "value": 10}]})


@pytest.fixture
def topics(db) -> dict[str, Topic]:
    service = factories.owner()
    return {"digest": Topic.objects.create(client=service, name="Weekly digest"),
            "news": Topic.objects.create(client=service, name="Product news"),
            "beta": Topic.objects.create(client=service, name="Beta programme", default_subscribed=False)}


def _subject(n: int) -> ConsentSubject:
    return ConsentSubject.of(factories.owner().pk, f"user{n}@example.com")


def _choose(topic: Topic, n: int, subscribed: bool) -> None:
    topic_subscription_set(subject=_subject(n), topic=topic, subscribed=subscribed, source=Source.API)


def _launch(api, template, segment, **extra) -> int:
    body = {"template_id": template.template_id, "recipients": {"type": "segment", "segment_id": segment.pk},
            **extra}
    response = api.post("/api/v1/notifications/email", body, format="json")
    assert response.status_code in (201, 202), response.content
    return response.json().get("campaign_id") or response.json()["schedule_id"]


def _reached(campaign_id: int) -> set[int]:
    """The contacts the fan-out wrote a row for, by their number."""
    campaign_fanout(campaign_id=campaign_id)
    rows = EmailMessage.objects.filter(campaign_id=campaign_id).values_list("recipient", flat=True)
    return {int(recipient.removeprefix("user").split("@")[0]) for recipient in rows}


EVERYONE = set(range(10))


def test_a_campaign_of_a_topic_skips_who_left_it_and_one_of_another_topic_reaches_them(
        api, template, segment, topics):
    _choose(topics["digest"], 1, False)
    _choose(topics["digest"], 2, False)
    _choose(topics["digest"], 2, True)   # left and came back: reached
    _choose(topics["news"], 5, False)
    broadcast_unsubscribe(subject=_subject(3), source=Source.LINK)  # left every broadcast
    digest = _launch(api, template, segment, topic="Weekly digest")
    news = _launch(api, template, segment, topic=topics["news"].pk)
    plain = _launch(api, template, segment)
    assert _reached(digest) == EVERYONE - {1, 3}
    assert _reached(news) == EVERYONE - {3, 5}
    assert _reached(plain) == EVERYONE - {3}
    rows = EmailMessage.objects.filter(campaign_id=digest).values_list("stream", "topic_id").distinct()
    assert list(rows) == [("broadcast", topics["digest"].pk)]
    assert Campaign.objects.get(pk=digest).excluded_count == 2
    # The campaign's answers show its topic.
    shown = api.get(f"/api/v1/campaigns/{digest}").json()["topic"]
    assert shown == {"id": topics["digest"].pk, "name": "Weekly digest"}
    listed = {row["campaign_id"]: row["topic"] for row in api.get("/api/v1/campaigns").json()["results"]}
    assert listed == {digest: shown, news: {"id": topics["news"].pk, "name": "Product news"}, plain: None}


def test_an_opt_in_topic_reaches_only_who_joined_it(api, template, segment, topics):
    for n in (4, 6, 8):
        _choose(topics["beta"], n, True)
    _choose(topics["beta"], 8, False)  # joined, then left
    broadcast_unsubscribe(subject=_subject(6), source=Source.LINK)  # joined, then left every broadcast
    assert _reached(_launch(api, template, segment, topic="Beta programme")) == {4}


def test_a_one_off_scheduled_campaign_keeps_its_topic(api, template, segment, topics):
    _choose(topics["digest"], 7, False)
    send_at = (timezone.now() + timedelta(hours=1)).isoformat()
    campaign_id = _launch(api, template, segment, topic="Weekly digest",
                          schedule={"type": "scheduled", "send_at": send_at})
    assert Campaign.objects.get(pk=campaign_id).topic_id == topics["digest"].pk
    assert _reached(campaign_id) == EVERYONE - {7}
    assert set(EmailMessage.objects.filter(campaign_id=campaign_id).values_list("status", flat=True)) == {
        "SCHEDULED"}


def _run(schedule_id: int) -> Campaign | None:
    before = set(Campaign.objects.values_list("id", flat=True))
    Schedule.objects.filter(pk=schedule_id).update(next_run=timezone.now() - timedelta(seconds=1))
    run_recurring.apply(args=[schedule_id])
    return Campaign.objects.exclude(id__in=before).first()


@pytest.mark.parametrize("via", ["notifications", "schedules"])
def test_each_run_of_a_recurring_definition_gets_its_topic_kept_by_id(api, template, segment, topics, via):
    _choose(topics["digest"], 9, False)
    definition = {"template_id": template.template_id, "topic": "Weekly digest",
                  "recipients": {"type": "segment", "segment_id": segment.pk}}
    if via == "notifications":
        schedule_id = _launch(api, template, segment, topic="Weekly digest",
                              schedule={"type": "recurring", "cron": "0 9 * * 1", "timezone": "UTC"})
    else:
        response = api.post("/api/v1/schedules", {"name": "digest", "type": "recurring", "cron": "0 9 * * 1",
                                                  "definition": definition}, format="json")
        assert response.status_code == 201, response.content
        schedule_id = response.json()["id"]
    # Stored by id: renaming the topic does not stop the runs.
    assert Schedule.objects.get(pk=schedule_id).definition["topic"] == topics["digest"].pk
    Topic.objects.filter(pk=topics["digest"].pk).update(name="The digest")
    campaign = _run(schedule_id)
    assert campaign is not None and campaign.topic_id == topics["digest"].pk
    assert _reached(campaign.pk) == EVERYONE - {9}
    # Archived: a run launches nothing, as a run whose audience is empty.
    Topic.objects.filter(pk=topics["digest"].pk).update(archived_at=datetime.now(UTC))
    assert _run(schedule_id) is None


@pytest.mark.parametrize("case", ["other service", "archived", "unknown", "unknown id", "object"])
@pytest.mark.parametrize("schedule", [None, "recurring"])
def test_a_bad_topic_is_a_400_naming_topic_and_writes_nothing(api, template, segment, topics, case, schedule):
    theirs = Topic.objects.create(client=service_create(name="other")[0], name="Theirs")
    Topic.objects.filter(pk=topics["news"].pk).update(archived_at=datetime.now(UTC))
    topic = {"other service": theirs.pk, "archived": "Product news", "unknown": "Nope",
             "unknown id": theirs.pk + 100, "object": {"id": 1}}[case]
    body = {"template_id": template.template_id, "recipients": {"type": "segment", "segment_id": segment.pk},
            "topic": topic}
    if schedule:
        body["schedule"] = {"type": "recurring", "cron": "0 9 * * 1"}
    response = api.post("/api/v1/notifications/email", body, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["fields"]) == ["topic"]
    assert not Campaign.objects.exists() and not Schedule.objects.exists()
    assert not EmailMessage.objects.exists()


def test_the_test_send_is_the_campaigns_broadcast_mail_of_its_topic(api, template, segment, topics):
    _choose(topics["digest"], 0, False)
    campaign_id = _launch(api, template, segment, topic="Weekly digest")
    response = api.post(f"/api/v1/campaigns/{campaign_id}/test",
                        {"emails": ["qa@x.io", "user0@example.com"]}, format="json")
    assert response.status_code == 202, response.content
    rows = EmailMessage.objects.filter(pk__in=response.json()["message_ids"]).order_by("id")
    assert [(m.recipient, m.stream, m.topic_id, m.status) for m in rows] == [
        ("qa@x.io", "broadcast", topics["digest"].pk, "QUEUED"),
        ("user0@example.com", "broadcast", topics["digest"].pk, "SUPPRESSED")]


def _click(contact_email: str, campaign_id: int) -> None:
    token = unsubscribe_token(contact_id=Contact.objects.get(email=contact_email).pk, campaign_id=campaign_id)
    assert Client().post(f"/u/{token}/").status_code == 200


def test_the_stats_count_each_campaigns_unsubscribes_per_topic_exactly(api, template, segment, topics):
    digest = _launch(api, template, segment, topic="Weekly digest")
    plain = _launch(api, template, segment)
    for _ in range(3):  # repeated clicks and one-click POSTs count once
        _click("user1@example.com", digest)
    _click("user2@example.com", digest)
    _click("user3@example.com", plain)  # leaves the broadcast stream
    _click("user3@example.com", digest)  # already out of every broadcast: the topic is still left
    # Another source naming the campaign (an ESP's unsubscribe event about its message).
    broadcast_unsubscribe(subject=_subject(4), source=Source.ESP_EVENT, campaign_id=digest)
    # Re-joining is not an unsubscribe.
    topic_subscription_set(subject=_subject(2), topic=topics["digest"], subscribed=True, source=Source.API)
    with CaptureQueriesContext(connection) as queries:
        stats = api.get(f"/api/v1/campaigns/{digest}/stats")
    assert stats.status_code == 200, stats.content
    assert stats.json()["unsubscribes_by_topic"] == [
        {"topic": None, "unsubscribed": 1},
        {"topic": {"id": topics["digest"].pk, "name": "Weekly digest"}, "unsubscribed": 3}]
    assert len([q for q in queries if "audience_consentchange" in q["sql"]]) == 1
    assert api.get(f"/api/v1/campaigns/{plain}/stats").json()["unsubscribes_by_topic"] == [
        {"topic": None, "unsubscribed": 1}]
