"""F18 and scopes: hashed keys, wrong/revoked keys, scopes, last-used time, create_api_key."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from clients.caller import Caller
from clients.models import ApiKey, Service
from clients.scopes import RequiresScope, default_scopes, parse_scopes
from clients.selectors import api_key_verified
from clients.services import api_key_revoke, service_create

pytestmark = pytest.mark.django_db


def _client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def _create_key(*argv: str) -> tuple[str, str]:
    out = StringIO()
    call_command("create_api_key", *argv, stdout=out)
    text = out.getvalue()
    return text, text.strip().splitlines()[-1]


def test_command_defaults_to_every_non_admin_scope_and_prints_the_key_last():
    text, key = _create_key("billing")
    api_key = api_key_verified(key)
    assert api_key.name == "billing" and api_key.service.name == "billing"
    assert api_key.key_type == "live" and key.startswith("ntf_live_")
    assert api_key.scopes == default_scopes() == api_key.service.scopes
    assert "admin" not in api_key.scopes and "keys" in api_key.scopes
    assert api_key.service.rate_limit == "" and "rate default" in text


def test_command_takes_scopes_and_a_rate_in_drf_notation():
    _, key = _create_key("crm", "--scopes", "send,campaigns", "--rate", "100/min")
    api_key = api_key_verified(key)
    assert api_key.scopes == ["send", "campaigns"] == api_key.service.scopes
    assert api_key.service.rate_limit == "100/min"


def test_command_adds_a_key_of_any_type_to_an_existing_service():
    _, first = _create_key("crm", "--scopes", "send,campaigns,analytics", "--rate", "100/min")
    service = api_key_verified(first).service
    text, test_key = _create_key("crm tests", "--service", "crm", "--type", "test",
                                 "--scopes", "send", "--rate", "10/min")
    api_key = api_key_verified(test_key)
    assert test_key.startswith("ntf_test_") and "test API key" in text
    assert api_key.service == service and api_key.key_type == "test"
    assert api_key.scopes == ["send"] and api_key.rate_limit == "10/min"
    assert Service.objects.count() == 1 and service.api_keys.count() == 2


@pytest.mark.parametrize(("argv", "named"), [
    (["--scopes", "send,admin"], "--scopes"),    # beyond the service's scopes
    (["--rate", "1000/min"], "--rate"),          # above the service's rate
    (["--service", "nosuch"], "no service"),
])
def test_command_refuses_a_key_beyond_its_service(argv, named):
    _create_key("crm", "--scopes", "send,campaigns", "--rate", "100/min")
    with pytest.raises(CommandError, match=named):
        _create_key("more", *(["--service", "crm"] if "--service" not in argv else []), *argv)
    assert ApiKey.objects.count() == 1


@pytest.mark.parametrize("argv", [["--scopes", "send,root"], ["--rate", "100/fortnight"],
                                  ["--rate", "0/s"], ["--scopes", ""]])
def test_command_rejects_bad_scopes_and_rates(argv):
    with pytest.raises(CommandError):
        _create_key("x", *argv)
    assert not ApiKey.objects.exists() and not Service.objects.exists()


def test_no_secret_is_stored_anywhere_in_the_row():
    service, key = service_create(name="svc")
    secret = key.split(".", 1)[1]
    row = ApiKey.objects.filter(service=service).values().get()
    assert not any(secret in str(value) for value in row.values())
    assert not any(secret in str(value) for value in Service.objects.values().get().values())


@pytest.mark.parametrize("mangle", [
    lambda key: key[:-1] + ("A" if key[-1] != "A" else "B"),   # right prefix, wrong secret
    lambda key: "ntf_live_nosuchpf." + key.split(".", 1)[1],    # unknown prefix
    lambda key: key.split(".", 1)[0],                            # prefix only
    lambda key: key.replace("ntf_live_", "ntf_test_"),           # another type's prefix
    lambda key: key.replace("ntf_live_", "ntf_"),                # a mangled type prefix
    lambda key: "",
])
def test_wrong_secret_is_a_401_in_the_error_shape(mangle):
    _, key = service_create(name="svc")
    response = _client_for(mangle(key)).get("/api/v1/messages/1")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response["WWW-Authenticate"] == "Api-Key, Bearer"


@pytest.mark.parametrize("header", ["Token {key}", "{key}", "Basic YTpi"])
def test_another_scheme_with_a_valid_key_is_a_401_naming_the_expected_ones(header):
    _, key = service_create(name="svc")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header.format(key=key))
    response = client.get("/api/v1/messages/999")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "unauthenticated"
    assert error["message"] == ("Unsupported authorization scheme: use 'Authorization: Api-Key <key>' "
                                "or 'Authorization: Bearer <token>'.")
    assert key not in response.content.decode()  # a bare key is never echoed back
    assert response["WWW-Authenticate"] == "Api-Key, Bearer"


def test_an_api_key_sent_as_a_bearer_token_is_a_401_not_a_key():
    _, key = service_create(name="svc")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.get("/api/v1/messages/999")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid bearer token."
    assert key not in response.content.decode()
    assert response["WWW-Authenticate"] == "Api-Key, Bearer"


def test_no_credentials_is_a_401_naming_the_scheme_and_the_scheme_is_case_insensitive():
    response = APIClient().get("/api/v1/messages/999")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == ("No credentials: send 'Authorization: Api-Key <key>' "
                                                   "or 'Authorization: Bearer <token>'.")
    _, key = service_create(name="svc")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"api-key {key}")  # RFC 9110: schemes ignore case
    assert client.get("/api/v1/messages/999").status_code == 404


def test_revoked_and_expired_keys_are_refused():
    service, key = service_create(name="svc")
    assert _client_for(key).get("/api/v1/messages/999").status_code == 404
    api_key_revoke(api_key=service.api_keys.get())
    assert _client_for(key).get("/api/v1/messages/999").status_code == 401
    other, other_key = service_create(name="old")
    ApiKey.objects.filter(service=other).update(expiry_date=timezone.now() - timedelta(seconds=1))
    response = _client_for(other_key).get("/api/v1/messages/999")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "API key has expired."


def test_a_key_made_before_types_works_without_a_type_prefix():
    _, key = service_create(name="svc")
    assert _client_for(key.removeprefix("ntf_live_")).get("/api/v1/messages/999").status_code == 404


def test_wrong_scope_is_a_403_naming_the_scope():
    _, key = service_create(name="reporting", scopes=["analytics"])
    response = _client_for(key).post("/api/v1/messages", {"to": "a@example.com"}, format="json")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "forbidden" and "'send'" in error["message"]


class _ReportView(APIView):
    permission_classes = [RequiresScope("analytics")]

    def get(self, request):
        return Response({"ok": True})

    def post(self, request):
        return Response({"ok": True})


@pytest.mark.parametrize(("scopes", "method", "allowed"), [
    (["analytics"], "get", True),
    (["analytics"], "post", False),     # analytics is read-only
    (["send"], "get", False),
    (["admin"], "post", True),          # admin holds every scope
])
def test_requires_scope_permission(scopes, method, allowed):
    from rest_framework.test import force_authenticate

    service, _ = service_create(name="x", scopes=scopes)
    request = getattr(APIRequestFactory(), method)("/report", {}, format="json")
    force_authenticate(request, user=Caller.of_service(service))
    response = _ReportView.as_view()(request)
    assert (response.status_code == 200) is allowed


def test_parse_scopes_rejects_unknown_names():
    assert parse_scopes("campaigns, send") == ["send", "campaigns"]
    with pytest.raises(ValueError, match="root"):
        parse_scopes("send,root")


def test_last_used_is_written_at_most_once_a_minute(django_assert_max_num_queries):
    service, key = service_create(name="svc")
    api = _client_for(key)
    api.get("/api/v1/messages/999")
    first = ApiKey.objects.get(service=service).last_used_at
    assert first is not None
    api.get("/api/v1/messages/999")
    assert ApiKey.objects.get(service=service).last_used_at == first
    stale = timezone.now() - timedelta(minutes=2)
    ApiKey.objects.filter(service=service).update(last_used_at=stale)
    api.get("/api/v1/messages/999")
    assert ApiKey.objects.get(service=service).last_used_at > stale


def test_system_check_flags_api_views_without_a_scope():
    from clients.checks import _unscoped, api_views_declare_a_scope

    class Unscoped(APIView):
        pass

    class Scoped(APIView):
        required_scope = "send"

    assert _unscoped(Unscoped) and not _unscoped(Scoped) and not _unscoped(_ReportView)
    assert api_views_declare_a_scope(None) == []      # every API view of this branch has one
