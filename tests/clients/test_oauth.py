"""OAuth2 client credentials beside API keys (issue 27, decision 104), on real PostgreSQL.

A client belongs to a service; `POST /oauth/token` (client_credentials only) issues short-lived
bearer tokens every API route accepts; the token acts as a live key of the client's service with
the token's scopes. Refusals: a wrong secret or unknown client (401 invalid_client), another
grant, a scope beyond the client; expired, unknown, malformed and revoked tokens are a 401 in
the error shape. The last test runs the Procfile's web server over real HTTP.
"""

from __future__ import annotations

import base64
import time
from datetime import timedelta
from io import StringIO

import pytest
import requests
from django.contrib.auth.hashers import identify_hasher
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import AccessToken
from rest_framework.test import APIClient

from clients.models import Service
from clients.oauth_cache import token_checksum
from clients.oauth_models import OAuthClient
from clients.oauth_services import oauth_client_create, oauth_client_revoke
from clients.services import api_key_create, service_create
from testkit import processes
from testkit.ports import free_port
from tests.support.web import wait_until_serving, web_server

pytestmark = pytest.mark.django_db
TEMPLATE = {"name": "welcome", "subject": "Welcome {{ name }}", "html_body": "<p>Hi {{ name }}</p>"}


def _api(scheme: str, credential: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {credential}")
    return client


def _basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def _token_response(client_id: str, secret: str, **form: str):
    return APIClient().post("/oauth/token", {"grant_type": "client_credentials", **form},
                            HTTP_AUTHORIZATION=_basic(client_id, secret))


def _token(client_id: str, secret: str, **form: str) -> str:
    response = _token_response(client_id, secret, **form)
    assert response.status_code == 200, response.content
    return response.json()["access_token"]


def _service_with_client(name: str = "svc", scopes: list[str] | None = None
                         ) -> tuple[Service, str, OAuthClient, str]:
    service, key = service_create(name=name)
    client, secret = oauth_client_create(service=service, name=f"{name}-job", scopes=scopes)
    return service, key, client, secret


def test_a_client_made_through_the_api_gets_a_token_that_works_as_its_service():
    service, key = service_create(name="crm")
    made = _api("Api-Key", key).post("/api/v1/oauth-clients", {"name": "nightly"}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert set(body) == {"client_id", "client_secret", "name", "scopes", "created", "created_by"}
    assert body["scopes"] == service.scopes  # default: the scopes of the key making it

    issued = _token_response(body["client_id"], body["client_secret"])
    assert issued.status_code == 200, issued.content
    token = issued.json()
    assert token["token_type"] == "Bearer" and token["expires_in"] == 3600
    assert "refresh_token" not in token
    assert sorted(token["scope"].split()) == sorted(service.scopes)

    created = _api("Bearer", token["access_token"]).post("/api/v1/templates", TEMPLATE, format="json")
    assert created.status_code == 201, created.content
    # The template is the service's: its API key reads it, the token reads it too.
    path = f"/api/v1/templates/{created.json()['id']}"
    assert _api("Api-Key", key).get(path).status_code == 200
    assert _api("Bearer", token["access_token"]).get(path).json()["name"] == "welcome"

    listed = _api("Api-Key", key).get("/api/v1/oauth-clients").json()
    assert [entry["client_id"] for entry in listed] == [body["client_id"]]
    assert "client_secret" not in listed[0]
    assert listed[0]["created_by"] == f"key:{service.api_keys.get().prefix}"
    # A token holding `keys` makes a client too, recorded as made by its client.
    second = _api("Bearer", token["access_token"]).post("/api/v1/oauth-clients", {"name": "b"},
                                                        format="json")
    assert second.status_code == 201 and second.json()["created_by"] == f"oauth:{body['client_id']}"


def test_secrets_and_tokens_are_stored_only_hashed():
    _, _, client, secret = _service_with_client()
    token = _token(client.client_id, secret)
    stored = OAuthClient.objects.get(pk=client.pk)
    assert secret not in stored.client_secret
    assert identify_hasher(stored.client_secret).algorithm == "oauth_client_sha512"
    row = AccessToken.objects.get(application=client)
    assert row.token == "" and token not in row.token_checksum  # RFC 9700's token storage


@pytest.mark.parametrize("mangle", [
    lambda client_id, secret: (client_id, secret[:-1] + ("A" if secret[-1] != "A" else "B")),
    lambda client_id, secret: ("nosuchclient", secret),
    lambda client_id, secret: (client_id, ""),
])
def test_a_wrong_secret_or_an_unknown_client_is_a_401_and_issues_nothing(mangle):
    _, _, client, secret = _service_with_client()
    response = _token_response(*mangle(client.client_id, secret))
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert AccessToken.objects.count() == 0


@pytest.mark.parametrize("header", [
    None, "Basic !!!", "Basic ", "Bearer x",
    "Basic " + base64.b64encode(b"nocolon").decode(),
    "Basic " + base64.b64encode(b"\xff:\xfe").decode(),
])
def test_a_token_request_with_no_or_broken_client_authentication_is_a_401(header):
    _service_with_client()
    extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = APIClient().post("/oauth/token", {"grant_type": "client_credentials"}, **extra)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert AccessToken.objects.count() == 0


def test_the_secret_in_the_form_body_works_too():
    _, _, client, secret = _service_with_client()
    response = APIClient().post("/oauth/token", {"grant_type": "client_credentials",
                                                 "client_id": client.client_id,
                                                 "client_secret": secret})
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(("form", "error"), [
    ({"grant_type": "password", "username": "a", "password": "b"}, "unsupported_grant_type"),
    ({"grant_type": "authorization_code", "code": "x"}, "unsupported_grant_type"),
    ({"grant_type": "refresh_token", "refresh_token": "x"}, "unsupported_grant_type"),
    ({}, "invalid_request"),
    ({"grant_type": "client_credentials", "scope": "admin"}, "invalid_scope"),
    ({"grant_type": "client_credentials", "scope": "send nosuchscope"}, "invalid_scope"),
])
def test_other_grants_and_scopes_beyond_the_client_are_refused(form, error):
    _, _, client, secret = _service_with_client(scopes=["send", "analytics"])
    response = APIClient().post("/oauth/token", form,
                                HTTP_AUTHORIZATION=_basic(client.client_id, secret))
    assert response.status_code in (400, 401)
    assert response.json()["error"] == error
    assert AccessToken.objects.count() == 0


def test_a_token_holds_the_requested_scopes_and_no_more():
    _, _, client, secret = _service_with_client(scopes=["send", "analytics"])
    narrow = _token(client.client_id, secret, scope="analytics")
    response = _api("Bearer", narrow).post("/api/v1/messages", {"to": "a@example.com"}, format="json")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "forbidden" and "'send'" in error["message"]
    # Past the scope check: a validation error, not a 403.
    full = _token(client.client_id, secret)
    response = _api("Bearer", full).post("/api/v1/messages", {"to": "a@example.com"}, format="json")
    assert response.status_code == 400


def test_a_scope_taken_from_the_service_is_taken_from_its_tokens():
    service, _, client, secret = _service_with_client(scopes=["send", "analytics"])
    token = _token(client.client_id, secret)
    service.scopes = ["analytics"]
    service.save()  # this process forgets the service's tokens at once
    response = _api("Bearer", token).post("/api/v1/messages", {"to": "a@example.com"}, format="json")
    assert response.status_code == 403


def test_a_token_of_service_a_never_reaches_service_b():
    _, key_a, client_a, secret_a = _service_with_client("a")
    _, key_b, client_b, _ = _service_with_client("b")
    template_b = _api("Api-Key", key_b).post("/api/v1/templates", TEMPLATE, format="json").json()
    token_a = _token(client_a.client_id, secret_a)
    assert _api("Bearer", token_a).get(f"/api/v1/templates/{template_b['id']}").status_code == 404
    assert _api("Bearer", token_a).get("/api/v1/templates").json()["results"] == []
    for caller in (_api("Bearer", token_a), _api("Api-Key", key_a)):
        assert caller.delete(f"/api/v1/oauth-clients/{client_b.client_id}").status_code == 404
    assert OAuthClient.objects.filter(pk=client_b.pk).exists()


def test_an_expired_token_is_a_401_even_while_cached(settings):
    settings.NOTIFIER_API_KEY_CACHE_SECONDS = 60.0
    _, _, client, secret = _service_with_client()
    token = _token(client.client_id, secret)
    # As if issued an hour ago: two seconds left (an update sends no signal to the cache).
    expires = timezone.now() + timedelta(seconds=2)
    AccessToken.objects.filter(application=client).update(expires=expires)
    assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 404  # cached now
    time.sleep((expires - timezone.now()).total_seconds() + 0.1)
    response = _api("Bearer", token).get("/api/v1/messages/999")
    assert response.status_code == 401
    assert response.json()["error"] == {"code": "unauthenticated", "message": "Bearer token has expired.",
                                        "fields": {}}


def test_revoking_through_the_api_refuses_the_tokens_at_once_in_this_process():
    _, key, client, secret = _service_with_client()
    token = _token(client.client_id, secret)
    assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 404
    assert _api("Api-Key", key).delete(f"/api/v1/oauth-clients/{client.client_id}").status_code == 204
    assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 401
    assert not AccessToken.objects.exists() and not OAuthClient.objects.exists()
    assert _token_response(client.client_id, secret).status_code == 401


def test_a_client_deleted_by_another_process_is_refused_within_the_cache_seconds(settings):
    settings.NOTIFIER_API_KEY_CACHE_SECONDS = 2.0
    _, _, client, secret = _service_with_client()
    token = _token(client.client_id, secret)
    assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 404
    with connection.cursor() as cursor:  # no signal reaches this process's cache
        cursor.execute("DELETE FROM oauth2_provider_accesstoken WHERE application_id = %s", [client.pk])
        cursor.execute("DELETE FROM clients_oauthclient WHERE id = %s", [client.pk])
    assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 404  # still trusted
    time.sleep(2.1)
    assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 401


def test_a_token_costs_one_lookup_per_cache_period(settings):
    settings.NOTIFIER_API_KEY_CACHE_SECONDS = 5.0  # the test session verifies every time
    _, _, client, secret = _service_with_client()
    token = _token(client.client_id, secret)

    def token_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert _api("Bearer", token).get("/api/v1/messages/999").status_code == 404
        return sum("oauth2_provider_accesstoken" in query["sql"] for query in queries)

    assert token_queries() == 1
    assert token_queries() == 0


@pytest.mark.parametrize("header", [
    "Bearer", "Bearer ", "bearer    ", "Bearer a b", "Bearer " + "x" * 300, "Bearer tök€n",
    "Bearer a\tb", "Bearer ====", "Bearer nosuchtoken",
])
def test_malformed_and_unknown_bearer_tokens_are_a_401_in_the_error_shape(header):
    response = APIClient().get("/api/v1/messages/999", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "unauthenticated"
    assert error["message"] in ("Malformed bearer token.", "Invalid bearer token.")
    assert response["WWW-Authenticate"] == "Api-Key, Bearer"


def test_the_client_api_refuses_bad_input_and_escalation_writing_nothing():
    service, key = service_create(name="svc", scopes=["send", "analytics", "keys"])
    api = _api("Api-Key", key)
    for body, field in [({"name": "x", "scopes": ["campaigns"]}, "scopes"),
                        ({"name": "x", "scopes": ["nope"]}, "scopes[0]"),
                        ({"name": "x", "color": "red"}, "color"),
                        ({"name": ""}, "name"), ({}, "name")]:
        response = api.post("/api/v1/oauth-clients", body, format="json")
        assert response.status_code == 400, body
        assert field in response.json()["error"]["fields"], body
    _, narrow = api_key_create(service=service, name="narrow", scopes=["keys"])
    response = _api("Api-Key", narrow).post("/api/v1/oauth-clients",
                                            {"name": "x", "scopes": ["send"]}, format="json")
    assert response.status_code == 400 and "scopes" in response.json()["error"]["fields"]
    _, test_key = api_key_create(service=service, name="ci", key_type="test", scopes=["keys"])
    response = _api("Api-Key", test_key).post("/api/v1/oauth-clients", {"name": "x"}, format="json")
    assert response.status_code == 403
    _, sender = api_key_create(service=service, name="sender", scopes=["send"])
    assert _api("Api-Key", sender).get("/api/v1/oauth-clients").status_code == 403
    assert not OAuthClient.objects.exists()


def test_the_command_prints_the_secret_last_and_refuses_a_scope_the_service_lacks():
    service, _ = service_create(name="billing", scopes=["send", "analytics"])
    out = StringIO()
    call_command("create_oauth_client", "exporter", "--service", "billing", "--scopes", "analytics",
                 stdout=out)
    lines = out.getvalue().strip().splitlines()
    client_id, secret = lines[-2].removeprefix("client_id "), lines[-1]
    client = OAuthClient.objects.get(client_id=client_id)
    assert client.service == service and client.scopes == ["analytics"]
    assert client.created_by == "command"
    assert _token_response(client_id, secret).json()["scope"] == "analytics"
    with pytest.raises(CommandError, match="--scopes: The service does not hold campaigns"):
        call_command("create_oauth_client", "x", "--service", "billing", "--scopes", "campaigns")
    with pytest.raises(CommandError, match="no service"):
        call_command("create_oauth_client", "x", "--service", "nosuchservice")


def test_the_admin_makes_a_client_of_a_service_and_shows_its_secret_once(admin_client):
    service, _ = service_create(name="crm", scopes=["send", "analytics"])
    response = admin_client.post(reverse("admin:clients_oauthclient_add"), {
        "service": service.pk, "name": "crm sync", "scopes": ["analytics"]}, follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    client = OAuthClient.objects.get(name="crm sync")
    secret = text.split("client_secret ", 1)[1].split(" ", 1)[0]
    assert _token_response(client.client_id, secret).status_code == 200
    assert secret not in admin_client.get(reverse("admin:clients_oauthclient_changelist")).content.decode()
    refused = admin_client.post(reverse("admin:clients_oauthclient_add"), {
        "service": service.pk, "name": "too wide", "scopes": ["campaigns"]})
    assert refused.status_code == 200 and not OAuthClient.objects.filter(name="too wide").exists()


def test_the_schema_documents_both_schemes_on_every_operation():
    schema = APIClient().get("/api/v1/schema/?format=json").json()
    schemes = schema["components"]["securitySchemes"]
    assert schemes["ApiKey"]["type"] == "apiKey"
    flow = schemes["OAuth2"]["flows"]["clientCredentials"]
    assert flow["tokenUrl"] == "/oauth/token" and "send" in flow["scopes"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            names = {name for requirement in operation.get("security", []) for name in requirement}
            assert {"ApiKey", "OAuth2"} <= names, (method, path)


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_token_over_http_works_until_its_client_is_revoked(tmp_path, spawn):
    service, _ = service_create(name="svc")
    client, secret = oauth_client_create(service=service, name="job")
    port = free_port()
    spawn(web_server(port, processes.subprocess_env(), tmp_path, workers=1))
    wait_until_serving(port)
    base = f"http://127.0.0.1:{port}"
    issued = requests.post(f"{base}/oauth/token", data={"grant_type": "client_credentials"},
                           auth=(client.client_id, secret), timeout=10)
    assert issued.status_code == 200, issued.text
    bearer = {"Authorization": f"Bearer {issued.json()['access_token']}"}

    def status() -> int:
        return requests.get(f"{base}/api/v1/messages/999999", headers=bearer, timeout=10).status_code

    assert status() == 404  # past authentication: no such message
    wrong = requests.post(f"{base}/oauth/token", data={"grant_type": "client_credentials"},
                          auth=(client.client_id, secret + "x"), timeout=10)
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    oauth_client_revoke(client=client)  # in this process: the server's cache learns it late
    cache_seconds = 5.0  # NOTIFIER_API_KEY_CACHE_SECONDS's default, which the server runs with
    deadline = time.monotonic() + cache_seconds + 5
    while status() != 401:
        assert time.monotonic() < deadline, "a revoked client's token was accepted past the cache"
        time.sleep(0.2)
    response = requests.get(f"{base}/api/v1/messages/999999", headers=bearer, timeout=10)
    assert response.json()["error"]["code"] == "unauthenticated"


def test_cleartokens_deletes_expired_tokens_only():
    _, _, client, secret = _service_with_client()
    expired, live = _token(client.client_id, secret), _token(client.client_id, secret)
    AccessToken.objects.filter(token_checksum=token_checksum(expired)).update(
        expires=timezone.now() - timedelta(seconds=1))
    call_command("cleartokens")
    assert list(AccessToken.objects.values_list("token_checksum", flat=True)) == [token_checksum(live)]
