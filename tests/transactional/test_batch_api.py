"""POST /api/v1/messages/batch (issue 29) through the real URL conf, database and broker.

Published tasks are read back from the broker's own queues (Redis lists), so "one publish per
priority" and "nothing published for a refused or replayed item" are what the broker holds.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from audience.models import Suppression
from clients.models import TeamMember
from clients.services import api_key_create, service_create
from core.priorities import Priority, queue_for
from core.redis_client import get_redis
from delivery.models import EmailMessage
from notifier.celery import app as celery_app
from scheduling.services.due import due_key
from templates.services import template_create
from tests import factories

pytestmark = pytest.mark.django_db
PATH = "/api/v1/messages/batch"


def _item(to: str = "ada@example.com", **extra) -> dict:
    return {"to": to, "template": "otp", "context": {"name": "Ada", "code": "1"}, **extra}


def _published(priority: Priority) -> list[list[int]]:
    """The message ids of each task queued for `priority`, oldest first."""
    with celery_app.connection_for_read() as conn:
        raw = conn.default_channel.client.lrange(queue_for(priority), 0, -1)
    return [json.loads(base64.b64decode(json.loads(m)["body"]))[0][0] for m in reversed(raw)]


def _api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


@pytest.fixture
def post(api, django_capture_on_commit_callbacks, purged_queues):
    """POST a batch (as `client`, default the owner's key) and run the after-commit publish."""
    def _post(body, client=None, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or api).post(PATH, body, format="json", **extra)
    return _post


def _fields(response) -> dict:
    return response.json()["error"]["fields"]


def test_a_valid_batch_is_one_insert_one_publish_per_priority_and_answers_in_order(otp_template, post):
    items = [_item("a@example.com", priority="critical"), _item("b@example.com", priority="normal"),
             _item("c@example.com", priority="critical"), _item("d@example.com", priority="normal")]
    with CaptureQueriesContext(connection) as queries:
        response = post({"messages": items})
    assert response.status_code == 202, response.content
    body = response.json()
    ids = [result["id"] for result in body["results"]]
    assert (body["accepted"], body["rejected"]) == (4, 0)
    assert [r["status"] for r in body["results"]] == ["QUEUED"] * 4
    rows = dict(EmailMessage.objects.values_list("id", "recipient"))
    assert [rows[i] for i in ids] == ["a@example.com", "b@example.com", "c@example.com", "d@example.com"]
    table = EmailMessage._meta.db_table
    inserts = [q for q in queries.captured_queries
               if f"INSERT INTO {table}" in q["sql"].replace('"', "")]
    assert len(inserts) == 1
    assert _published(Priority.CRITICAL) == [[ids[0]], [ids[2]]]  # P0 tasks carry one id each
    assert _published(Priority.NORMAL) == [[ids[1], ids[3]]]  # one task: one publish for P2
    assert EmailMessage.objects.get(pk=ids[1]).priority == Priority.NORMAL


def test_a_mixed_batch_is_a_207_naming_each_bad_item_and_writes_only_the_valid(otp_template, post):
    items = [_item("a@example.com"), _item("not-an-address"),
             {"to": "c@example.com", "template": "otp", "context": {"name": "C"}},
             _item("d@example.com", template="nope"), "not an object",
             _item("f@example.com", bcc="x@example.com"), _item("g@example.com")]
    response = post({"messages": items})
    assert response.status_code == 207, response.content
    body = response.json()
    results = body["results"]
    assert (body["accepted"], body["rejected"], len(results)) == (2, 5, 7)
    assert list(results[1]["error"]["fields"]) == ["messages[1].to"]
    assert "code" in results[2]["error"]["fields"]["messages[2].context"][0]
    assert "nope" in results[3]["error"]["fields"]["messages[3].template"][0]
    assert list(results[4]["error"]["fields"]) == ["messages[4]"]
    assert list(results[5]["error"]["fields"]) == ["messages[5].bcc"]
    assert {r["error"]["code"] for r in results[1:6]} == {"invalid"}
    written = sorted(EmailMessage.objects.values_list("id", "recipient"))
    assert written == [(results[0]["id"], "a@example.com"), (results[6]["id"], "g@example.com")]
    assert _published(Priority.HIGH) == [[results[0]["id"], results[6]["id"]]]


def test_a_batch_with_no_valid_item_is_a_400_naming_each_and_writes_nothing(otp_template, post):
    response = post({"messages": [_item("bad"), _item("ok@example.com", priority="urgent")]})
    assert response.status_code == 400, response.content
    assert set(_fields(response)) == {"messages[0].to", "messages[1].priority"}
    assert not EmailMessage.objects.exists()
    assert _published(Priority.HIGH) == []


@pytest.mark.parametrize(("body", "field"), [
    ([_item()], "non_field_errors"),
    ({}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": {"to": "a@example.com"}}, "messages"),
    ({"messages": [_item()], "extra": 1}, "extra"),
])
def test_a_malformed_body_is_a_400_naming_what_is_wrong(otp_template, post, body, field):
    response = post(body)
    assert response.status_code == 400, response.content
    assert field in _fields(response)
    assert not EmailMessage.objects.exists()


def test_over_the_count_or_the_byte_limit_is_a_413_naming_messages(otp_template, post, settings):
    too_many = post({"messages": [_item(f"u{n}@example.com") for n in range(1001)]})
    assert too_many.status_code == 413, too_many.content
    assert too_many.json()["error"]["code"] == "too_large"
    assert "1000" in _fields(too_many)["messages"][0]
    settings.NOTIFIER_BATCH_MAX_BODY_BYTES = 2000
    too_big = post({"messages": [_item(f"u{n}@example.com") for n in range(30)]})
    assert too_big.status_code == 413, too_big.content
    assert "2000 bytes" in _fields(too_big)["messages"][0]
    assert not EmailMessage.objects.exists()


def test_a_batch_may_be_larger_than_the_single_request_limit(otp_template, post, settings):
    settings.NOTIFIER_API_MAX_BODY_BYTES = 2000  # a single send's limit does not bound a batch
    response = post({"messages": [_item(f"u{n}@example.com") for n in range(30)]})
    assert response.status_code == 202, response.content


def test_each_items_idempotency_key_replays_its_message_or_refuses_another(otp_template, post):
    first = post({"messages": [_item("a@example.com", idempotency_key="k1"),
                               _item("b@example.com", idempotency_key="k2")]})
    assert first.status_code == 202
    a_id, b_id = (r["id"] for r in first.json()["results"])
    other_context = {"name": "X", "code": "2"}
    again = post({"messages": [_item("a@example.com", idempotency_key="k1"),
                               _item("b@example.com", idempotency_key="k2", context=other_context),
                               _item("c@example.com", idempotency_key="k3")]})
    assert again.status_code == 207, again.content
    replayed, conflict, new = again.json()["results"]
    assert replayed == {"id": a_id, "status": "QUEUED", "replayed": True}
    assert conflict["error"]["code"] == "conflict"
    assert list(conflict["error"]["fields"]) == ["messages[1].idempotency_key"]
    assert EmailMessage.objects.count() == 3 and "replayed" not in new
    assert EmailMessage.objects.get(pk=b_id).context == {"name": "Ada", "code": "1"}
    # Published: the first batch's two, then only the new one (never the replayed item again).
    assert _published(Priority.HIGH) == [[a_id, b_id], [new["id"]]]
    only_conflicts = post({"messages": [_item("b@example.com", idempotency_key="k2", priority="low")]})
    assert only_conflicts.status_code == 409, only_conflicts.content
    assert list(_fields(only_conflicts)) == ["messages[0].idempotency_key"]


def test_a_key_repeated_within_one_batch_makes_one_message(otp_template, post):
    response = post({"messages": [_item(idempotency_key="same"), _item(idempotency_key="same"),
                                  _item("z@example.com", idempotency_key="same")]})
    assert response.status_code == 207, response.content
    first, second, third = response.json()["results"]
    assert second == {"id": first["id"], "status": "QUEUED", "replayed": True}
    assert third["error"]["code"] == "conflict"
    assert EmailMessage.objects.count() == 1
    assert _published(Priority.HIGH) == [[first["id"]]]


def test_the_idempotency_key_header_replays_the_whole_answer(otp_template, post):
    body = {"messages": [_item("a@example.com"), _item("bad")]}
    first = post(body, HTTP_IDEMPOTENCY_KEY="batch-1")
    again = post(body, HTTP_IDEMPOTENCY_KEY="batch-1")
    assert (first.status_code, again.status_code) == (207, 207)
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert EmailMessage.objects.count() == 1


def test_a_suppressed_recipient_is_answered_suppressed_and_never_published(otp_template, post):
    Suppression.objects.create(email="gone@example.com")
    response = post({"messages": [_item("Gone@example.com"), _item("here@example.com")]})
    assert response.status_code == 202
    gone, here = response.json()["results"]
    assert gone["status"] == "SUPPRESSED" and here["status"] == "QUEUED"
    assert EmailMessage.objects.get(pk=gone["id"]).error == "suppressed"
    assert _published(Priority.HIGH) == [[here["id"]]]


def test_a_scheduled_item_waits_in_the_due_set(otp_template, post):
    response = post({"messages": [_item(schedule={"type": "delayed", "delay_seconds": 60}), _item()]})
    assert response.status_code == 202, response.content
    later, now = response.json()["results"]
    assert later["status"] == "SCHEDULED" and later["scheduled_for"]
    assert get_redis().zscore(due_key(), str(later["id"])) is not None
    assert _published(Priority.HIGH) == [[now["id"]]]
    bad = post({"messages": [_item(schedule={"type": "delayed"})]})
    assert "messages[0].schedule.delay_seconds" in _fields(bad)


def test_a_team_key_sends_only_to_the_team_list(otp_template, post):
    service = factories.owner()
    TeamMember.objects.create(service=service, email="dev@example.com")
    _, team_key = api_key_create(service=service, name="team", key_type="team")
    response = post({"messages": [_item("Dev@example.com"), _item("stranger@example.com")]},
                    client=_api(team_key))
    assert response.status_code == 207, response.content
    accepted, refused = response.json()["results"]
    assert list(refused["error"]["fields"]) == ["messages[1].to"]
    assert EmailMessage.objects.get().pk == accepted["id"]
    assert EmailMessage.objects.get().key_type == "team"


def test_a_test_keys_batch_records_test_messages(otp_template, post):
    _, test_key = api_key_create(service=factories.owner(), name="ci", key_type="test")
    response = post({"messages": [_item("delivered@simulator.notifier.test")]}, client=_api(test_key))
    assert response.status_code == 202, response.content
    assert EmailMessage.objects.get().key_type == "test"


def test_another_services_template_is_the_missing_template_error(otp_template, post):
    other, _ = service_create(name="other")
    template_create(client=other, name="theirs", subject="s", html_body="<p>{{ name }}</p>")
    template_create(client=other, name="otp", subject="theirs", html_body="<p>theirs</p>")
    response = post({"messages": [_item(template="theirs"), _item(template=str(otp_template.template_id))]})
    assert response.status_code == 207, response.content
    refused, mine = response.json()["results"]
    assert "theirs" in refused["error"]["fields"]["messages[0].template"][0]
    assert EmailMessage.objects.get(pk=mine["id"]).template_version_id == otp_template.id


def test_a_batch_counts_as_one_request_against_the_send_budget(otp_template, post):
    service = factories.owner()
    service.endpoint_rate_limits = {"send": "2/min"}
    service.save(update_fields=["endpoint_rate_limits"])
    answers = [post({"messages": [_item(f"u{n}@example.com") for n in range(10)]}).status_code
               for _ in range(3)]
    assert answers == [202, 202, 429]
    assert EmailMessage.objects.count() == 20
