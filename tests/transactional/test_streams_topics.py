"""POST /api/v1/messages and /messages/batch name a stream and a topic (issue 28, decision 106).

A broadcast send is answered SUPPRESSED at accept when its recipient left the service's broadcast
stream or the topic (or an opt-in topic they never joined); a transactional send to the same
address is queued, whatever they left. Stream and topic are written on the row, shown by
GET /messages/{id}, and part of what an idempotency key's retry must repeat. A bad topic is a 400
naming `topic` and writes nothing. (tests/delivery/test_consent_at_send.py drives such sends to
the provider.)
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from audience.models import ConsentChange, Stream, Suppression, Topic
from audience.services.consent import ConsentSubject, broadcast_unsubscribe, topic_subscription_set
from clients.services import service_create
from delivery.models import EmailMessage
from templates.services import template_create
from tests import factories

pytestmark = pytest.mark.django_db
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "123456"}}
BATCH = "/api/v1/messages/batch"


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    """Record what would be published."""
    published = []
    monkeypatch.setattr("transactional.services.messages_enqueue", lambda **kwargs: published.append(kwargs))
    monkeypatch.setattr("transactional.batch.messages_enqueue", lambda **kwargs: published.append(kwargs))
    return published


@pytest.fixture
def send(api, django_capture_on_commit_callbacks):
    def _send(body, path="/api/v1/messages", **headers):
        with django_capture_on_commit_callbacks(execute=True):
            return api.post(path, body, format="json", **headers)
    return _send


@pytest.fixture
def digest(db) -> Topic:
    return Topic.objects.create(client=factories.owner(), name="Weekly digest")


def leave(topic: Topic, email: str) -> None:
    topic_subscription_set(subject=ConsentSubject.of(topic.client_id, email), topic=topic, subscribed=False,
                           source=ConsentChange.Source.API)


def news(topic: Topic | None = None, **extra) -> dict:
    body = {**OTP, "priority": "normal", "stream": "broadcast", **extra}
    return {**body, "topic": topic.name} if topic is not None else body


def test_a_broadcast_send_to_who_left_the_topic_is_suppressed_an_otp_is_queued(otp_template, digest, send,
                                                                                _no_broker):
    leave(digest, "Ada@Example.com")
    refused = send(news(digest))
    assert refused.status_code == 202 and refused.json()["status"] == "SUPPRESSED"
    otp = send(OTP)
    assert otp.status_code == 202 and otp.json()["status"] == "QUEUED"
    rows = {row.id: row for row in EmailMessage.objects.all()}
    newsletter, code = rows[refused.json()["id"]], rows[otp.json()["id"]]
    assert (newsletter.stream, newsletter.topic_id, newsletter.error) == (
        "broadcast", digest.pk, "suppressed")
    assert (code.stream, code.topic_id, code.error) == ("transactional", None, "")
    assert [call["message_ids"] for call in _no_broker] == [[code.id]]
    # Another topic, and the broadcast stream with no topic, still reach them.
    other = Topic.objects.create(client=factories.owner(), name="Product news")
    assert send(news(other)).json()["status"] == "QUEUED"
    assert send(news()).json()["status"] == "QUEUED"


def test_the_topic_is_named_by_id_or_by_name_and_shown_by_get(api, otp_template, digest, send):
    by_id = send({**news(), "topic": digest.pk}).json()
    by_digits = send({**news(), "topic": str(digest.pk)}).json()
    by_name = send(news(digest)).json()
    assert {EmailMessage.objects.get(pk=body["id"]).topic_id for body in (by_id, by_digits, by_name)} == {
        digest.pk}
    shown = api.get(f"/api/v1/messages/{by_name['id']}").json()
    assert (shown["stream"], shown["topic"]) == ("broadcast", {"id": digest.pk, "name": "Weekly digest"})
    otp = api.get(f"/api/v1/messages/{send(OTP).json()['id']}").json()
    assert (otp["stream"], otp["topic"]) == ("transactional", None)


def test_an_opt_in_topic_reaches_only_who_joined_it(otp_template, send):
    beta = Topic.objects.create(client=factories.owner(), name="Beta programme", default_subscribed=False)
    topic_subscription_set(subject=ConsentSubject.of(beta.client_id, "grace@example.com"), topic=beta,
                           subscribed=True, source=ConsentChange.Source.API)
    assert send(news(beta)).json()["status"] == "SUPPRESSED"  # ada never joined
    assert send(news(beta, to="grace@example.com")).json()["status"] == "QUEUED"


def test_who_left_the_broadcast_stream_gets_no_broadcast_send_but_every_otp(otp_template, digest, send):
    broadcast_unsubscribe(subject=ConsentSubject.of(factories.owner().pk, "ada@example.com"),
                          source=ConsentChange.Source.LINK)
    assert send(news()).json()["status"] == "SUPPRESSED"
    assert send(news(digest)).json()["status"] == "SUPPRESSED"
    assert send(OTP).json()["status"] == "QUEUED"
    # Another service's broadcast mail is not theirs to stop.
    other, other_key = service_create(name="other")
    template_create(client=other, name="otp", subject="Code {{ code }}", html_body="<p>{{ name }}</p>")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    assert client.post("/api/v1/messages", news(), format="json").json()["status"] == "QUEUED"


def test_a_hard_bounce_stops_both_streams(otp_template, send):
    Suppression.objects.create(email="ada@example.com", reason="hard_bounce")
    assert send(news()).json()["status"] == send(OTP).json()["status"] == "SUPPRESSED"


@pytest.mark.parametrize("case", ["transactional", "no stream", "other service", "archived", "unknown",
                                  "unknown id", "huge id", "boolean", "empty"])
def test_a_bad_topic_is_a_400_naming_topic_and_writes_nothing(otp_template, digest, send, _no_broker, case):
    other_topic = Topic.objects.create(client=service_create(name="other")[0], name="Theirs")
    archived = Topic.objects.create(client=factories.owner(), name="Old", archived_at=datetime.now(UTC))
    body = {
        "transactional": {**OTP, "stream": "transactional", "topic": digest.name},
        "no stream": {**OTP, "topic": digest.pk},
        "other service": news(other_topic),
        "archived": news(archived),
        "unknown": {**news(), "topic": "Nope"},
        "unknown id": {**news(), "topic": other_topic.pk + 1000},
        "huge id": {**news(), "topic": "9" * 30},
        "boolean": {**news(), "topic": True},
        "empty": {**news(), "topic": ""},
    }[case]
    for path, payload, field in [("/api/v1/messages", body, "topic"),
                                 (BATCH, {"messages": [body]}, "messages[0].topic")]:
        response = send(payload, path=path)
        assert response.status_code == 400, response.content
        assert list(response.json()["error"]["fields"]) == [field], response.json()
    assert not EmailMessage.objects.exists() and _no_broker == []
    # Another service's topic reads as a missing one: nothing says it exists.
    if case == "other service":
        assert "No topic 'Theirs'" in send(body).json()["error"]["fields"]["topic"][0]
    assert send(news(digest)).status_code == 202  # and the service's own topic is taken


def test_a_bad_stream_is_a_400_naming_stream(otp_template, send):
    response = send({**OTP, "stream": "marketing"})
    assert response.status_code == 400 and "stream" in response.json()["error"]["fields"]
    assert not EmailMessage.objects.exists()
    assert [send({**OTP, "stream": stream}).status_code for stream in Stream.values] == [202, 202]


@pytest.mark.parametrize(("first", "retry"), [
    ({}, {"stream": "broadcast"}),
    ({"stream": "broadcast"}, {"stream": "broadcast", "topic": "Weekly digest"}),
])
def test_an_idempotency_key_retried_with_another_stream_or_topic_is_a_409(otp_template, digest, send,
                                                                          first, retry):
    assert send({**OTP, **first, "idempotency_key": "k1"}).status_code == 202
    assert send({**OTP, **retry, "idempotency_key": "k1"}).status_code == 409
    batch = send({"messages": [{**OTP, **retry, "idempotency_key": "k1"}]}, path=BATCH)
    assert batch.status_code == 409, batch.content
    # The same request again is the first message's replay, in the single send and in a batch.
    same = {**OTP, **retry, "idempotency_key": "k2"}
    message_id = send(same).json()["id"]
    replayed = send(same)
    assert (replayed.json()["id"], replayed["Idempotent-Replayed"]) == (message_id, "true")
    batch = send({"messages": [same]}, path=BATCH)
    assert batch.json()["results"] == [{"id": message_id, "status": "QUEUED", "replayed": True}]
    assert EmailMessage.objects.count() == 2


def test_a_batch_of_mixed_streams_decides_each_item_in_one_statement(otp_template, digest, send, _no_broker):
    leave(digest, "ada@example.com")
    items = [news(digest), OTP, news(digest, to="grace@example.com"), news(),
             {**news(), "topic": "Nope", "to": "bob@example.com"}]
    with CaptureQueriesContext(connection) as queries:
        response = send({"messages": items}, path=BATCH)
    assert response.status_code == 207, response.content
    results = response.json()["results"]
    assert [result.get("status") for result in results] == ["SUPPRESSED", "QUEUED", "QUEUED", "QUEUED", None]
    assert "messages[4].topic" in results[4]["error"]["fields"]
    rows = {row.id: (row.recipient, row.stream, row.topic_id) for row in EmailMessage.objects.all()}
    assert [rows[result["id"]] for result in results[:4]] == [
        ("ada@example.com", "broadcast", digest.pk), ("ada@example.com", "transactional", None),
        ("grace@example.com", "broadcast", digest.pk), ("ada@example.com", "broadcast", None)]
    inserts = [q["sql"] for q in queries if "INSERT INTO delivery_emailmessage" in q["sql"]]
    assert len(inserts) == 1
    # Each topic the batch names is looked up once (the refused one too).
    topic_reads = [q["sql"] for q in queries if 'FROM "audience_topic"' in q["sql"]]
    assert len(topic_reads) == 2, topic_reads


def test_a_transactional_send_costs_the_statement_it_always_did(otp_template, send):
    """One INSERT whose only consent look is the all-streams suppression; a broadcast one also
    reads the broadcast-scope suppression and the topic's subscriptions, in the same statement."""
    send(OTP | {"idempotency_key": "warm"})  # warms the per-process template cache
    with CaptureQueriesContext(connection) as queries:
        send(OTP)
    writes = [q["sql"] for q in queries if "INSERT INTO" in q["sql"] and "delivery_emailmessage" in q["sql"]]
    assert len(writes) == 1 and "sup_all" in writes[0]
    assert "sup_bc" not in writes[0] and "audience_topicsubscription" not in writes[0]
    with CaptureQueriesContext(connection) as queries:
        send(news(Topic.objects.create(client=factories.owner(), name="t")))
    writes = [q["sql"] for q in queries if "delivery_emailmessage" in q["sql"] and "INSERT" in q["sql"]]
    assert len(writes) == 1 and "sup_bc" in writes[0] and "audience_topicsubscription" in writes[0]
