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

from clients.models import ApiClient
from clients.scopes import RequiresScope, default_scopes, parse_scopes
from clients.services import api_client_create, api_client_revoke

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
    client = ApiClient.objects.get_from_key(key)
    assert client.is_valid(key) and client.name == "billing"
    assert client.scopes == default_scopes() and "admin" not in client.scopes
    assert client.rate_limit == "" and "rate default" in text


def test_command_takes_scopes_and_a_rate_in_drf_notation():
    _, key = _create_key("crm", "--scopes", "send,campaigns", "--rate", "100/min")
    client = ApiClient.objects.get_from_key(key)
    assert client.scopes == ["send", "campaigns"] and client.rate_limit == "100/min"


@pytest.mark.parametrize("argv", [["--scopes", "send,root"], ["--rate", "100/fortnight"],
                                  ["--rate", "0/s"], ["--scopes", ""]])
def test_command_rejects_bad_scopes_and_rates(argv):
    with pytest.raises(CommandError):
        _create_key("x", *argv)
    assert not ApiClient.objects.exists()


def test_no_secret_is_stored_anywhere_in_the_row():
    client, key = api_client_create(name="svc")
    secret = key.split(".", 1)[1]
    row = ApiClient.objects.filter(pk=client.pk).values().get()
    assert not any(secret in str(value) for value in row.values())


@pytest.mark.parametrize("mangle", [
    lambda key: key[:-1] + ("A" if key[-1] != "A" else "B"),   # right prefix, wrong secret
    lambda key: "nosuchpf." + key.split(".", 1)[1],             # unknown prefix
    lambda key: key.split(".", 1)[0],                            # prefix only
    lambda key: "",
])
def test_wrong_secret_is_a_401_in_the_error_shape(mangle):
    _, key = api_client_create(name="svc")
    response = _client_for(mangle(key)).get("/api/v1/messages/1")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response["WWW-Authenticate"] == "Api-Key"


@pytest.mark.parametrize("header", ["Bearer {key}", "Token {key}", "{key}", "Basic YTpi"])
def test_another_scheme_with_a_valid_key_is_a_401_naming_the_expected_one(header):
    _, key = api_client_create(name="svc")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header.format(key=key))
    response = client.get("/api/v1/messages/999")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "unauthenticated"
    assert error["message"] == "Unsupported authorization scheme: use 'Authorization: Api-Key <key>'."
    assert key not in response.content.decode()  # a bare key is never echoed back
    assert response["WWW-Authenticate"] == "Api-Key"


def test_no_credentials_is_a_401_naming_the_scheme_and_the_scheme_is_case_insensitive():
    response = APIClient().get("/api/v1/messages/999")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "No credentials: send 'Authorization: Api-Key <key>'."
    _, key = api_client_create(name="svc")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"api-key {key}")  # RFC 9110: schemes ignore case
    assert client.get("/api/v1/messages/999").status_code == 404


def test_revoked_and_expired_keys_are_refused():
    client, key = api_client_create(name="svc")
    assert _client_for(key).get("/api/v1/messages/999").status_code == 404
    api_client_revoke(client=client)
    assert _client_for(key).get("/api/v1/messages/999").status_code == 401
    other, other_key = api_client_create(name="old")
    ApiClient.objects.filter(pk=other.pk).update(expiry_date=timezone.now() - timedelta(seconds=1))
    assert _client_for(other_key).get("/api/v1/messages/999").status_code == 401


def test_wrong_scope_is_a_403_naming_the_scope():
    _, key = api_client_create(name="reporting", scopes=["analytics"])
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

    client, _ = api_client_create(name="x", scopes=scopes)
    request = getattr(APIRequestFactory(), method)("/report", {}, format="json")
    force_authenticate(request, user=client)
    response = _ReportView.as_view()(request)
    assert (response.status_code == 200) is allowed


def test_parse_scopes_rejects_unknown_names():
    assert parse_scopes("campaigns, send") == ["send", "campaigns"]
    with pytest.raises(ValueError, match="root"):
        parse_scopes("send,root")


def test_last_used_is_written_at_most_once_a_minute(django_assert_max_num_queries):
    client, key = api_client_create(name="svc")
    api = _client_for(key)
    api.get("/api/v1/messages/999")
    first = ApiClient.objects.get(pk=client.pk).last_used_at
    assert first is not None
    api.get("/api/v1/messages/999")
    assert ApiClient.objects.get(pk=client.pk).last_used_at == first
    stale = timezone.now() - timedelta(minutes=2)
    ApiClient.objects.filter(pk=client.pk).update(last_used_at=stale)
    api.get("/api/v1/messages/999")
    assert ApiClient.objects.get(pk=client.pk).last_used_at > stale


def test_system_check_flags_api_views_without_a_scope():
    from clients.checks import _unscoped, api_views_declare_a_scope

    class Unscoped(APIView):
        pass

    class Scoped(APIView):
        required_scope = "send"

    assert _unscoped(Unscoped) and not _unscoped(Scoped) and not _unscoped(_ReportView)
    assert api_views_declare_a_scope(None) == []      # every API view of this branch has one
