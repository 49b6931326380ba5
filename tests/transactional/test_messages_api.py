"""POST/GET /api/v1/messages and POST /api/v1/templates through the real URL conf."""

import pytest
from rest_framework.test import APIClient

from audience.models import Suppression
from clients.models import ApiKey
from clients.services import service_create
from delivery.models import EmailMessage
from templates.models import Template
from templates.services import template_create

pytestmark = pytest.mark.django_db
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "123456"}}


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    """Record what would be published; the end-to-end tests publish for real."""
    published = []
    monkeypatch.setattr("transactional.services.messages_enqueue",
                        lambda **kwargs: published.append(kwargs))
    return published


@pytest.fixture
def send(api, django_capture_on_commit_callbacks):
    """POST a message and run the after-commit callbacks the test transaction never fires."""
    def _send(body):
        with django_capture_on_commit_callbacks(execute=True):
            return api.post("/api/v1/messages", body, format="json")
    return _send


@pytest.mark.parametrize("header", [None, "Api-Key wrong.key", "Bearer something"])
def test_requests_without_a_valid_key_are_refused(header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.post("/api/v1/messages", OTP, format="json")
    assert response.status_code in (401, 403)
    assert response.json()["error"]["code"] in ("unauthenticated", "forbidden")


def test_revoked_key_is_refused(api, api_key, send):
    ApiKey.objects.update(revoked=True)
    assert send(OTP).status_code == 401


def test_key_is_stored_only_as_a_hash(api_key):
    key_row = ApiKey.objects.get()
    assert api_key not in (key_row.hashed_key, key_row.prefix, key_row.id)
    assert api_key.split(".")[-1] not in key_row.hashed_key + key_row.id
    assert key_row.hashed_key.startswith("sha512$$")


def test_template_create_returns_first_version(api):
    response = api.post("/api/v1/templates", {"name": "receipt", "subject": "Receipt {{ n }}",
                                             "html_body": "<p>{{ total }}</p>"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["id"], body["name"], body["version"]) == (Template.objects.get().id, "receipt", 1)
    assert body["variables"] == ["n", "total"]


def test_template_syntax_error_is_a_400_with_the_line(api):
    response = api.post("/api/v1/templates", {"name": "bad", "subject": "x",
                                             "html_body": "<p>\n{% if %}"}, format="json")
    assert response.status_code == 400
    assert "line 2" in response.json()["error"]["fields"]["template"][0]
    assert not Template.objects.exists()


def test_message_is_accepted_and_queued_once(api, otp_template, _no_broker, send):
    response = send(OTP)
    assert response.status_code == 202
    message = EmailMessage.objects.get()
    assert response.json() == {"id": message.id, "status": "QUEUED"}
    assert (message.priority, message.template_version_id) == (0, otp_template.id)
    assert _no_broker == [{"message_ids": [message.id], "priority": 0}]


def test_same_idempotency_key_returns_same_message_and_queues_nothing_new(otp_template, _no_broker, send):
    body = {**OTP, "idempotency_key": "order-42"}
    first = send(body)
    second = send(body)
    assert first.json()["id"] == second.json()["id"]
    assert second["Idempotent-Replayed"] == "true"
    assert EmailMessage.objects.count() == 1 and len(_no_broker) == 1


@pytest.mark.parametrize("change", [{"context": {"name": "Ada", "code": "999999"}},
                                    {"to": "grace@example.com"}, {"priority": "low"}])
@pytest.mark.parametrize("where", ["body", "header"])
def test_an_idempotency_key_reused_with_a_different_body_is_a_409_either_way(
        api, otp_template, _no_broker, change, where, django_capture_on_commit_callbacks):
    def post(body: dict):
        with django_capture_on_commit_callbacks(execute=True):
            if where == "header":
                return api.post("/api/v1/messages", body, format="json",
                                HTTP_IDEMPOTENCY_KEY="order-7")
            return api.post("/api/v1/messages", {**body, "idempotency_key": "order-7"},
                            format="json")

    assert post(OTP).status_code == 202
    second = post({**OTP, **change})
    assert second.status_code == 409, second.content
    assert second.json()["error"]["code"] == "conflict" and "Idempotent-Replayed" not in second
    assert EmailMessage.objects.count() == 1 and len(_no_broker) == 1


def test_idempotency_keys_are_scoped_to_the_client(api, otp_template, send):
    other_client, other_key = service_create(name="other")
    template = otp_template.template
    template_create(client=other_client, name=template.name, subject=otp_template.subject,
                    html_body=otp_template.html_body)  # its own template of the same name
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    body = {**OTP, "idempotency_key": "same"}
    assert send(body).json()["id"] != \
        other.post("/api/v1/messages", body, format="json").json()["id"]


def test_suppressed_recipient_is_recorded_and_not_queued(api, otp_template, _no_broker, send):
    Suppression.objects.create(email="ada@example.com", reason="complaint")
    response = send(OTP)
    assert response.json()["status"] == "SUPPRESSED"
    assert _no_broker == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"priority": "urgent"}, "priority"),
        ({"to": "not-an-address"}, "to"),
        ({"to": "a@example.com\r\nBcc: x@example.com"}, "to"),
        ({"template": "nope"}, "template"),
        ({"context": {"name": "Ada"}}, "context"),
        ({"context": "a string"}, "context"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(api, otp_template, _no_broker, change, field, send):
    response = send({**OTP, **change})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"]
    assert not EmailMessage.objects.exists() and _no_broker == []


def test_malformed_json_is_a_400(api, otp_template):
    response = api.post("/api/v1/messages", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]
    assert not EmailMessage.objects.exists()


def test_message_detail_shows_status_and_is_private_to_its_client(api, otp_template, send):
    message_id = send(OTP).json()["id"]
    detail = api.get(f"/api/v1/messages/{message_id}").json()
    assert detail["status"] == "QUEUED" and detail["priority"] == "critical"
    assert detail["template"] == "otp" and detail["attempts"] == 0
    _, other_key = service_create(name="other")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    assert other.get(f"/api/v1/messages/{message_id}").status_code == 404
