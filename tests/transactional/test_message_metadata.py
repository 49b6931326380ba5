"""A message's `metadata` (issue 29): validated on POST /api/v1/messages and on each item of a
batch, stored as sent (the batch's one INSERT included), read back by GET /api/v1/messages/{id}."""

from __future__ import annotations

import pytest

from delivery.models import EmailMessage

pytestmark = pytest.mark.django_db
OTP = {"to": "ada@example.com", "template": "otp", "context": {"name": "Ada", "code": "1"}}
META = {"order_id": "A-1001", "attempt": 2, "amount": 9.5, "vip": True}


@pytest.fixture
def post(api, otp_template, django_capture_on_commit_callbacks, purged_queues):
    def _post(path: str, body: dict):
        with django_capture_on_commit_callbacks(execute=True):
            return api.post(path, body, format="json")
    return _post


def _fields(response) -> dict:
    assert response.status_code == 400, response.content
    return response.json()["error"]["fields"]


def test_single_send_metadata_round_trips(api, post):
    response = post("/api/v1/messages", {**OTP, "metadata": META})
    assert response.status_code == 202
    message_id = response.json()["id"]
    assert EmailMessage.objects.get(pk=message_id).metadata == META
    assert api.get(f"/api/v1/messages/{message_id}").json()["metadata"] == META


@pytest.mark.parametrize("metadata", [None, {}])
def test_no_metadata_is_stored_as_null(api, post, metadata):
    body = {**OTP} if metadata is None else {**OTP, "metadata": metadata}
    message_id = post("/api/v1/messages", body).json()["id"]
    assert EmailMessage.objects.get(pk=message_id).metadata is None
    assert api.get(f"/api/v1/messages/{message_id}").json()["metadata"] is None


@pytest.mark.parametrize(("metadata", "field"), [
    ({"order_id": {"nested": 1}}, "metadata.order_id"),
    ({"order_id": [1, 2]}, "metadata.order_id"),
    ({"order_id": None}, "metadata.order_id"),
    ({"order_id": "x" * 501}, "metadata.order_id"),
    ({"order_id": "a\x00b"}, "metadata.order_id"),
    ({"k" * 41: "v"}, "metadata." + "k" * 41),
    ({"order id": "v"}, "metadata.order id"),
    ({"": "v"}, "metadata."),
    ({f"k{i}": i for i in range(21)}, "metadata"),
    (["order_id"], "metadata"),
    ("order_id=1", "metadata"),
])
def test_bad_metadata_is_a_400_naming_it_and_writes_nothing(post, metadata, field):
    fields = _fields(post("/api/v1/messages", {**OTP, "metadata": metadata}))
    assert list(fields) == [field]
    assert not EmailMessage.objects.exists()


def test_metadata_at_its_bounds_is_accepted(post):
    metadata = {f"{i:02d}" + "k" * 38: "v" * 500 for i in range(20)}
    response = post("/api/v1/messages", {**OTP, "metadata": metadata})
    assert response.status_code == 202
    assert EmailMessage.objects.get().metadata == metadata


def test_a_retry_with_other_metadata_is_a_conflict(post):
    first = post("/api/v1/messages", {**OTP, "idempotency_key": "k1", "metadata": {"a": 1}})
    assert post("/api/v1/messages", {**OTP, "idempotency_key": "k1", "metadata": {"a": 1}}).json() == \
        first.json()
    assert post("/api/v1/messages", {**OTP, "idempotency_key": "k1", "metadata": {"a": 2}}).status_code == 409


def test_batch_items_carry_their_own_metadata(api, post):
    items = [{**OTP, "metadata": {"n": 0}}, {**OTP, "to": "bob@example.com"},
             {**OTP, "to": "eve@example.com", "metadata": META}]
    response = post("/api/v1/messages/batch", {"messages": items})
    assert response.status_code == 202, response.content
    ids = [result["id"] for result in response.json()["results"]]
    stored = dict(EmailMessage.objects.filter(pk__in=ids).values_list("pk", "metadata"))
    assert [stored[i] for i in ids] == [{"n": 0}, None, META]
    assert api.get(f"/api/v1/messages/{ids[2]}").json()["metadata"] == META


def test_a_batch_item_with_bad_metadata_is_refused_alone(post):
    items = [{**OTP, "metadata": {"ok": "yes"}}, {**OTP, "to": "bob@example.com", "metadata": {"bad": {}}},
             {**OTP, "to": "eve@example.com", "metadata": "nope"}]
    response = post("/api/v1/messages/batch", {"messages": items})
    assert response.status_code == 207
    results = response.json()["results"]
    assert results[0]["status"] == "QUEUED"
    assert list(results[1]["error"]["fields"]) == ["messages[1].metadata.bad"]
    assert list(results[2]["error"]["fields"]) == ["messages[2].metadata"]
    assert EmailMessage.objects.get().metadata == {"ok": "yes"}


def test_a_batch_replay_compares_metadata(post):
    item = {**OTP, "idempotency_key": "b1", "metadata": {"a": "1"}}
    first = post("/api/v1/messages/batch", {"messages": [item]}).json()["results"][0]
    again = post("/api/v1/messages/batch", {"messages": [item]}).json()["results"][0]
    assert again == {**first, "replayed": True}
    other = post("/api/v1/messages/batch", {"messages": [{**item, "metadata": {"a": "2"}}]})
    assert other.status_code == 409
