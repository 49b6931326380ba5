"""Issue 27: a service's keys through the API (rotation, types, scopes, revocation), its shared
rate budget, and team keys."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from campaigns.models import Campaign
from clients.models import ApiKey, Service, TeamMember
from clients.services import service_create
from delivery.models import EmailMessage
from scheduling.models import Schedule
from templates.models import Template

pytestmark = pytest.mark.django_db

OTP = {"template": "otp", "context": {"name": "Dev", "code": "1"}}


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("transactional.services.messages_enqueue", lambda **kwargs: None)


def _api(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return api


def _service(name: str = "crm", **kwargs) -> tuple[Service, APIClient]:
    service, key = service_create(name=name, rate_limit=kwargs.pop("rate_limit", "10000/min"), **kwargs)
    return service, _api(key)


def _new_key(api: APIClient, **body) -> dict:
    response = api.post("/api/v1/keys", {"name": "second", **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_rotation_second_key_then_revoke_the_first_both_answer_in_between():
    service, first = _service()
    made = first.post("/api/v1/templates", {"name": "otp", "subject": "s", "html_body": "<p>x</p>"},
                      format="json")
    assert made.status_code == 201
    created = _new_key(first)
    assert created["key"].startswith("ntf_live_") and created["type"] == "live"
    second = _api(created["key"])
    for api in (first, second):  # both keys answer, and see the same service's rows
        assert [t["id"] for t in api.get("/api/v1/templates").json()["results"]] == [made.json()["id"]]
    first_id = service.api_keys.exclude(prefix=created["id"]).get().prefix
    assert second.delete(f"/api/v1/keys/{first_id}").status_code == 204
    assert first.get("/api/v1/templates").status_code == 401
    assert second.get("/api/v1/templates").status_code == 200
    listed = second.get("/api/v1/keys").json()
    assert {k["id"]: k["revoked"] for k in listed} == {first_id: True, created["id"]: False}


def test_the_secret_is_answered_once_and_never_stored_or_listed():
    _, api = _service()
    created = _new_key(api, type="test", scopes=["send"])
    secret = created["key"].split(".", 1)[1]
    for response in (api.get("/api/v1/keys"), api.get(f"/api/v1/keys/{created['id']}")):
        assert response.status_code == 200 and secret not in response.content.decode()
        assert "key" not in (response.json()[0] if isinstance(response.json(), list) else response.json())
    row = ApiKey.objects.filter(prefix=created["id"]).values().get()
    assert not any(secret in str(value) for value in row.values())
    assert created["created_by"].startswith("key:") and created["scopes"] == ["send"]


def test_the_keys_scope_is_needed_and_a_key_never_reaches_further_than_its_maker():
    _, api = _service(scopes=["send", "analytics", "keys"])
    narrow = _api(_new_key(api, scopes=["send"])["key"])
    assert narrow.get("/api/v1/keys").status_code == 403  # no `keys` scope
    wider = api.post("/api/v1/keys", {"name": "x", "scopes": ["send", "campaigns"]}, format="json")
    assert wider.status_code == 400 and "scopes" in wider.json()["error"]["fields"]
    test_key = _api(_new_key(api, type="test")["key"])
    live = test_key.post("/api/v1/keys", {"name": "escape", "type": "live"}, format="json")
    assert live.status_code == 400 and "type" in live.json()["error"]["fields"]
    assert test_key.post("/api/v1/keys", {"name": "ok", "type": "test"}, format="json").status_code == 201
    assert ApiKey.objects.filter(name__in=["x", "escape"]).count() == 0


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "x", "type": "root"}, "type"),
    ({"name": "x", "scopes": ["send", "nosuch"]}, "scopes"),
    ({"name": "x", "scopes": []}, "scopes"),
    ({"name": "x", "expiry_date": "2001-01-01T00:00:00Z"}, "expiry_date"),
    ({"name": "x", "rate_limit": "100000/min"}, "rate_limit"),
    ({"name": "x", "rate_limit": "fast"}, "rate_limit"),
    ({"name": "x", "colour": "red"}, "colour"),
    ({}, "name"),
])
def test_bad_key_input_is_a_400_naming_the_field_and_writes_nothing(body, field):
    service, api = _service()
    response = api.post("/api/v1/keys", body, format="json")
    assert response.status_code == 400, response.content
    assert any(name.startswith(field) for name in response.json()["error"]["fields"]), response.json()
    assert service.api_keys.count() == 1


def test_an_expiring_key_works_until_its_date_then_is_a_401():
    _, api = _service()
    created = _new_key(api, expiry_date=(timezone.now() + timedelta(hours=1)).isoformat())
    key = _api(created["key"])
    assert key.get("/api/v1/service").status_code == 200
    ApiKey.objects.filter(prefix=created["id"]).update(expiry_date=timezone.now() - timedelta(seconds=1))
    response = key.get("/api/v1/service")
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthenticated"


def test_another_services_key_is_a_404_and_stays_usable():
    _, a = _service("a")
    _, b = _service("b")
    a_key = _new_key(a)
    assert b.get(f"/api/v1/keys/{a_key['id']}").status_code == 404
    assert b.delete(f"/api/v1/keys/{a_key['id']}").status_code == 404
    assert a_key["id"] not in {k["id"] for k in b.get("/api/v1/keys").json()}
    assert _api(a_key["key"]).get("/api/v1/service").status_code == 200


def test_the_service_describes_itself_to_any_of_its_keys():
    service, api = _service(scopes=["send", "keys"])
    reader = _api(_new_key(api, scopes=["send"])["key"])
    body = reader.get("/api/v1/service").json()
    assert (body["id"], body["name"], body["scopes"]) == (service.pk, "crm", ["send", "keys"])


def test_a_second_key_is_not_a_second_budget_and_a_key_may_be_held_lower(settings):
    _, first = _service(rate_limit="5/min")
    second = _api(_new_key(first)["key"])  # the first of the service's 5 requests
    assert [first.get("/api/v1/service").status_code for _ in range(2)] == [200, 200]
    assert [second.get("/api/v1/service").status_code for _ in range(3)] == [200, 200, 429]
    assert first.get("/api/v1/service").status_code == 429  # one budget for the service
    _, other = _service("other", rate_limit="100/min")
    slow = _api(_new_key(other, rate_limit="2/min")["key"])
    assert [slow.get("/api/v1/service").status_code for _ in range(3)] == [200, 200, 429]
    assert other.get("/api/v1/service").status_code == 200  # the service still has room


def test_a_team_key_sends_only_to_the_team_list(otp_template):
    service = otp_template.template.client
    owner = _api_of_owner()
    team = _api(_new_key(owner, name="team", type="team")["key"])
    refused = team.post("/api/v1/messages", {"to": "stranger@example.com", **OTP}, format="json")
    assert refused.status_code == 400 and "to" in refused.json()["error"]["fields"]
    assert not EmailMessage.objects.exists()
    assert owner.post("/api/v1/team-members", {"email": "Dev@Example.com"}, format="json").status_code == 201
    accepted = team.post("/api/v1/messages", {"to": "dev@example.com", **OTP}, format="json")
    assert accepted.status_code == 202, accepted.content
    campaign = team.post("/api/v1/notifications/email", {
        "template_id": otp_template.template_id, "recipients": {"type": "list", "list_id": 1}},
        format="json")
    assert campaign.status_code == 400 and "recipients" in campaign.json()["error"]["fields"]
    recurring = team.post("/api/v1/schedules", {
        "name": "weekly", "type": "recurring", "cron": "0 9 * * 1", "definition": {
            "template_id": otp_template.template_id, "recipients": {"type": "inline", "contacts": [
                {"email": "dev@example.com"}, {"email": "stranger@example.com"}]}}}, format="json")
    assert recurring.status_code == 400, recurring.content
    assert "stranger@example.com" in recurring.json()["error"]["fields"]["definition.recipients"][0]
    assert EmailMessage.objects.count() == 1 and service.pk == EmailMessage.objects.get().client_id
    assert not Schedule.objects.exists() and not Campaign.objects.exists()


def _api_of_owner() -> APIClient:
    from tests import factories

    return _api(factories.owner_key())


def test_team_list_input_is_checked_and_per_service():
    _, api = _service()
    assert api.post("/api/v1/team-members", {"email": "not-an-address"}, format="json").status_code == 400
    assert api.post("/api/v1/team-members", {"email": "dev@example.com"}, format="json").status_code == 201
    again = api.post("/api/v1/team-members", {"email": "dev@example.com"}, format="json")
    assert again.status_code == 400 and "email" in again.json()["error"]["fields"]
    member_id = api.get("/api/v1/team-members").json()[0]["id"]
    _, other = _service("other")
    assert other.delete(f"/api/v1/team-members/{member_id}").status_code == 404
    assert api.delete(f"/api/v1/team-members/{member_id}").status_code == 204
    assert not TeamMember.objects.exists()


def test_a_revoked_key_leaves_the_services_rows_in_place():
    service, api = _service()
    api.post("/api/v1/templates", {"name": "t", "subject": "s", "html_body": "<p>x</p>"}, format="json")
    second = _new_key(api)
    api.delete(f"/api/v1/keys/{second['id']}")
    assert Template.objects.filter(client=service).count() == 1


def test_a_test_keys_messages_are_its_own_and_a_live_key_sees_them_only_when_asked(otp_template):
    live = _api_of_owner()
    test = _api(_new_key(live, name="ci", type="test")["key"])
    sent = test.post("/api/v1/messages", {"to": "delivered@simulator.notifier.test", **OTP},
                     format="json")
    assert sent.status_code == 202, sent.content
    message_id = sent.json()["id"]
    assert EmailMessage.objects.get(pk=message_id).key_type == "test"
    assert test.get(f"/api/v1/messages/{message_id}").status_code == 200
    assert live.get(f"/api/v1/messages/{message_id}").status_code == 404
    assert live.get(f"/api/v1/messages/{message_id}?key_type=test").status_code == 200
    live_id = live.post("/api/v1/messages", {"to": "ada@example.com", **OTP}, format="json").json()["id"]
    assert test.get(f"/api/v1/messages/{live_id}").status_code == 404  # a test key never reads live
