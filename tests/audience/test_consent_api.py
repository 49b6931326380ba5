"""The consent API (issue 28): topics (create, change, archive, tenancy), a contact's preferences
(GET/PUT, all or nothing, the refusal after a bounce, the history), suppressions with a scope."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from audience.models import ConsentChange, Contact, Suppression, Topic, TopicSubscription
from audience.topics import topic_for_send
from clients.services import service_create
from tests import factories

pytestmark = pytest.mark.django_db


def _other_service() -> tuple[object, APIClient]:
    service, key = service_create(name="other-service")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return service, api


def _topic(name: str = "news", service=None, **fields) -> Topic:
    return Topic.objects.create(client=service or factories.owner(), name=name, **fields)


def _contact(email: str = "ada@example.com", service=None) -> Contact:
    return Contact.objects.create(client=service or factories.owner(), email=email)


# --- topics -----------------------------------------------------------------------------------


def test_a_topic_is_created_listed_read_and_changed(api):
    created = api.post("/api/v1/topics", {"name": "product-news", "description": "Monthly."}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["name"], body["description"], body["default_subscribed"], body["archived_at"]) == (
        "product-news", "Monthly.", True, None)
    topic_id = body["id"]
    assert [t["id"] for t in api.get("/api/v1/topics").json()["results"]] == [topic_id]
    assert api.get(f"/api/v1/topics/{topic_id}").json()["name"] == "product-news"
    changed = api.patch(f"/api/v1/topics/{topic_id}", {"default_subscribed": False}, format="json")
    assert changed.status_code == 200 and changed.json()["default_subscribed"] is False
    assert changed.json()["name"] == "product-news"  # untouched fields keep their value
    assert Topic.objects.get(pk=topic_id).default_subscribed is False


def test_a_topic_name_is_unique_per_service_and_never_digits_only(api):
    _topic("news")
    bad = ({"name": "news"}, {"name": "1234"}, {"name": ""}, {"name": "a\nb"}, {"name": "x", "extra": 1})
    for body in bad:
        response = api.post("/api/v1/topics", body, format="json")
        assert response.status_code == 400, (body, response.content)
        assert set(response.json()["error"]["fields"]) == ({"extra"} if "extra" in body else {"name"}), body
    assert Topic.objects.count() == 1
    _, other_api = _other_service()
    assert other_api.post("/api/v1/topics", {"name": "news"}, format="json").status_code == 201
    second = _topic("digest")
    response = api.patch(f"/api/v1/topics/{second.pk}", {"name": "news"}, format="json")
    assert response.status_code == 400 and list(response.json()["error"]["fields"]) == ["name"]
    assert api.patch(f"/api/v1/topics/{second.pk}", {"name": "digest"}, format="json").status_code == 200


def test_deleting_a_topic_archives_it_and_keeps_its_choices_and_history(api):
    topic = _topic("news")
    TopicSubscription.objects.create(topic=topic, email="ada@example.com", subscribed=False)
    ConsentChange.objects.create(client=topic.client, email="ada@example.com", topic=topic, subscribed=False,
                                 source="link", occurred_at="2026-01-01T00:00:00Z")
    assert api.delete(f"/api/v1/topics/{topic.pk}").status_code == 204
    topic.refresh_from_db()
    assert topic.archived_at is not None
    assert TopicSubscription.objects.filter(topic=topic).exists() and ConsentChange.objects.exists()
    assert api.get("/api/v1/topics").json()["results"] == []
    assert [t["id"] for t in api.get("/api/v1/topics?archived=true").json()["results"]] == [topic.pk]
    assert api.get(f"/api/v1/topics/{topic.pk}").json()["archived_at"] is not None
    again = api.delete(f"/api/v1/topics/{topic.pk}")
    assert again.status_code == 404 and again.json()["error"]["code"] == "not_found"
    assert api.patch(f"/api/v1/topics/{topic.pk}", {"description": "x"}, format="json").status_code == 409
    with pytest.raises(Exception, match="topic"):
        topic_for_send(topic.client, topic.pk)


def test_another_services_topic_is_a_404_and_never_listed(api):
    other, _ = _other_service()
    theirs = _topic("secret-topic", service=other)
    for method, body in (("get", None), ("patch", {"description": "mine"}), ("delete", None)):
        response = getattr(api, method)(f"/api/v1/topics/{theirs.pk}", body, format="json")
        assert response.status_code == 404, (method, response.content)
    assert "secret-topic" not in api.get("/api/v1/topics").content.decode()
    theirs.refresh_from_db()
    assert (theirs.description, theirs.archived_at) == ("", None)


def test_topic_for_send_names_by_id_or_name_the_services_own_unarchived_topic():
    from rest_framework.exceptions import ValidationError

    mine = _topic("news")
    assert topic_for_send(factories.owner(), mine.pk) == mine
    assert topic_for_send(factories.owner().pk, "news") == mine
    assert topic_for_send(factories.owner(), str(mine.pk)) == mine
    other, _ = _other_service()
    theirs = _topic("theirs", service=other)
    for reference in (theirs.pk, "theirs", "nope", "9" * 30):
        with pytest.raises(ValidationError) as caught:
            topic_for_send(factories.owner(), reference, field="definition.topic")
        assert list(caught.value.detail) == ["definition.topic"]


# --- preferences ------------------------------------------------------------------------------


def test_preferences_show_broadcast_topics_suppression_and_history(api):
    contact = _contact()
    news, digest = _topic("news"), _topic("digest", default_subscribed=False)
    _topic("old", archived_at="2026-01-01T00:00:00Z")
    TopicSubscription.objects.create(topic=news, email=contact.email, subscribed=False)
    response = api.get(f"/api/v1/contacts/{contact.pk}/preferences")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["contact_id"], body["email"], body["broadcast"], body["suppressed"]) == (
        contact.pk, "ada@example.com", True, None)
    assert body["topics"] == [
        {"id": digest.pk, "name": "digest", "subscribed": False, "default_subscribed": False,
         "chosen": False},
        {"id": news.pk, "name": "news", "subscribed": False, "default_subscribed": True, "chosen": True}]
    assert body["history"] == []
    # The path may name the contact by its address too.
    assert api.get("/api/v1/contacts/ADA@example.com/preferences").json() == body


def test_put_applies_every_choice_records_each_change_once_and_answers_the_new_state(api):
    contact = _contact()
    _topic("news")
    digest = _topic("digest", default_subscribed=False)
    choice = {"broadcast": False, "topics": {"news": False, str(digest.pk): True}}
    first = api.put(f"/api/v1/contacts/{contact.pk}/preferences", choice, format="json")
    assert first.status_code == 200, first.content
    body = first.json()
    assert body["broadcast"] is False
    assert {t["name"]: (t["subscribed"], t["chosen"]) for t in body["topics"]} == {
        "news": (False, True), "digest": (True, True)}
    assert {(h["topic"], h["subscribed"], h["source"]) for h in body["history"]} == {
        (None, False, "api"), ("news", False, "api"), ("digest", True, "api")}
    assert Suppression.objects.get(email=contact.email).scope == "broadcast"
    # The same again changes nothing and records nothing.
    again = api.put(f"/api/v1/contacts/{contact.pk}/preferences", choice, format="json")
    assert again.status_code == 200 and len(again.json()["history"]) == 3
    assert ConsentChange.objects.count() == 3
    back = api.put(f"/api/v1/contacts/{contact.pk}/preferences", {"broadcast": True}, format="json")
    assert back.json()["broadcast"] is True and back.json()["history"][0]["subscribed"] is True
    assert not Suppression.objects.exists() and Contact.objects.get(pk=contact.pk).subscribed


def test_put_with_a_bad_topic_is_a_400_naming_it_and_writes_nothing(api):
    contact = _contact()
    _topic("news")
    _topic("gone", archived_at="2026-01-01T00:00:00Z")
    other, _ = _other_service()
    theirs = _topic("theirs", service=other)
    for key in ("nope", "gone", str(theirs.pk), "theirs"):
        response = api.put(f"/api/v1/contacts/{contact.pk}/preferences",
                           {"broadcast": False, "topics": {"news": False, key: False}}, format="json")
        assert response.status_code == 400, response.content
        assert list(response.json()["error"]["fields"]) == [f"topics.{key}"], response.json()
    response = api.put(f"/api/v1/contacts/{contact.pk}/preferences",
                       {"broadcast": False, "topics": {"news": "maybe"}}, format="json")
    assert list(response.json()["error"]["fields"]) == ["topics.news"]
    response = api.put(f"/api/v1/contacts/{contact.pk}/preferences", {"everything": False}, format="json")
    assert list(response.json()["error"]["fields"]) == ["everything"]
    assert not TopicSubscription.objects.exists() and not ConsentChange.objects.exists()
    assert not Suppression.objects.exists() and Contact.objects.get(pk=contact.pk).subscribed


def test_put_re_subscribing_after_a_hard_bounce_is_a_409_and_changes_nothing(api):
    contact = _contact()
    news = _topic("news")
    Suppression.objects.create(email=contact.email, reason="hard_bounce", source="ses")
    for choice in ({"topics": {"news": True}}, {"broadcast": True},
                   {"topics": {"news": False}, "broadcast": True}):
        response = api.put(f"/api/v1/contacts/{contact.pk}/preferences", choice, format="json")
        assert response.status_code == 409, response.content
        assert "suppressed for every stream (hard_bounce)" in response.json()["error"]["message"]
    assert not TopicSubscription.objects.filter(topic=news).exists() and not ConsentChange.objects.exists()
    # Leaving is always allowed, and the answer says why no mail reaches them anyway.
    left = api.put(f"/api/v1/contacts/{contact.pk}/preferences", {"topics": {"news": False}}, format="json")
    assert left.status_code == 200 and left.json()["suppressed"] == "hard_bounce"


def test_another_services_contact_is_a_404_by_id_and_by_address(api):
    other, _ = _other_service()
    theirs = _contact("grace@example.com", service=other)
    for path in (str(theirs.pk), theirs.email, "not-a-contact"):
        assert api.get(f"/api/v1/contacts/{path}/preferences").status_code == 404
        assert api.put(f"/api/v1/contacts/{path}/preferences", {"broadcast": False},
                       format="json").status_code == 404
    assert not Suppression.objects.exists()


# --- suppressions with a scope ------------------------------------------------------------------


def test_a_broadcast_suppression_by_the_api_is_an_unsubscribe_and_its_delete_a_resubscribe(api):
    contact = _contact()
    created = api.post("/api/v1/suppressions", {"email": contact.email, "scope": "broadcast"}, format="json")
    assert created.status_code == 201, created.content
    assert (created.json()["scope"], created.json()["reason"]) == ("broadcast", "unsubscribe")
    assert api.post("/api/v1/suppressions", {"email": contact.email, "scope": "broadcast"},
                    format="json").status_code == 200
    refused = api.post("/api/v1/suppressions", {"email": contact.email, "scope": "broadcast",
                                                "reason": "complaint"}, format="json")
    assert refused.status_code == 400 and list(refused.json()["error"]["fields"]) == ["reason"]
    # An all-streams one beside it (a legal request): both listed, each with its scope.
    assert api.post("/api/v1/suppressions", {"email": contact.email}, format="json").status_code == 201
    listed = api.get("/api/v1/suppressions").json()["results"]
    assert [(row["scope"], row["reason"]) for row in listed] == [
        ("all", "manual"), ("broadcast", "unsubscribe")]
    assert [r["scope"] for r in api.get("/api/v1/suppressions?scope=broadcast").json()["results"]] == [
        "broadcast"]
    assert api.get(f"/api/v1/suppressions/{contact.email}?scope=broadcast").json()["scope"] == "broadcast"
    assert ConsentChange.objects.get().subscribed is False
    # Removing only the broadcast row while the address is suppressed everywhere: refused.
    response = api.delete(f"/api/v1/suppressions/{contact.email}?scope=broadcast")
    assert response.status_code == 409 and Suppression.objects.count() == 2
    # Removing both: the all-streams one goes, and the broadcast one is a re-subscription.
    assert api.delete(f"/api/v1/suppressions/{contact.email}").status_code == 204
    assert not Suppression.objects.exists()
    assert list(ConsentChange.objects.order_by("id").values_list("subscribed", "source")) == [
        (False, "api"), (True, "api")]
    assert Contact.objects.get(pk=contact.pk).subscribed


def test_an_all_streams_suppression_is_created_beside_a_broadcast_one(api):
    """The all-streams lookup must not take another scope's row for its own."""
    Suppression.objects.create(email="ada@example.com", reason="unsubscribe", scope="broadcast",
                               client=factories.owner())
    response = api.post("/api/v1/suppressions", {"email": "ada@example.com", "reason": "complaint"},
                        format="json")
    assert response.status_code == 201 and response.json()["scope"] == "all", response.content
    assert api.get("/api/v1/suppressions/ada@example.com").json()["reason"] == "complaint"


def test_a_suppression_list_page_ends_with_all_rows_of_its_last_address(api):
    owner = factories.owner()
    for n in range(100):
        Suppression.objects.create(email=f"u{n:03}@example.com", reason="manual", client=owner)
    Suppression.objects.create(email="u099@example.com", reason="unsubscribe", scope="broadcast",
                               client=owner)
    first = api.get("/api/v1/suppressions").json()
    assert [r["scope"] for r in first["results"][-2:]] == ["all", "broadcast"]
    assert first["next_after"] == "u099@example.com"
    assert api.get(f"/api/v1/suppressions?after={first['next_after']}").json()["results"] == []


def test_a_contact_imported_unsubscribed_comes_back_with_a_history_row(api):
    """A bulk `subscribed: false` sets only the contact's flag: bringing them back is still a
    change of state, recorded once however often it is asked."""
    rows = {"contacts": [{"email": "ada@example.com", "subscribed": False}]}
    assert api.post("/api/v1/contacts/bulk", rows, format="json").status_code in (200, 201, 207)
    assert api.get("/api/v1/contacts/ada@example.com/preferences").json()["broadcast"] is False
    for _ in range(2):
        back = api.put("/api/v1/contacts/ada@example.com/preferences", {"broadcast": True}, format="json")
        assert back.status_code == 200 and back.json()["broadcast"] is True
    rows = ConsentChange.objects.filter(email="ada@example.com", topic=None)
    assert list(rows.values_list("subscribed", "source")) == [(True, "api")]
