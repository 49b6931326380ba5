"""Idempotency-Key: replay, conflict, scoping, Redis loss, concurrency, expiry."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import psycopg2
import pytest
import requests
from django.db import connection
from django.utils import timezone
from rest_framework import status
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from clients.caller import Caller
from clients.idempotency import IdempotentMixin
from clients.models import IdempotencyRecord, Service
from clients.services import service_create
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from templates.models import Template, TemplateVersion
from tests import factories

BODY = {"name": "receipt", "subject": "Receipt {{ n }}", "html_body": "<p>{{ n }}</p>"}


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("transactional.services.messages_enqueue", lambda **kwargs: None)


def _post(api: APIClient, body: dict, key: str, url: str = "/api/v1/templates"):
    return api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def _flush_fast_path() -> None:
    redis = get_redis()
    for name in redis.scan_iter(redis_key("idem-http", "*")):
        redis.delete(name)


@pytest.mark.django_db
def test_same_key_and_body_replays_the_first_response(api):
    key = str(uuid.uuid4())
    first = _post(api, BODY, key)
    second = _post(api, BODY, key)
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert second["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Template.objects.count() == 1


@pytest.mark.django_db
def test_replay_survives_losing_the_redis_fast_path(api):
    key = str(uuid.uuid4())
    first = _post(api, BODY, key)
    _flush_fast_path()
    second = _post(api, BODY, key)
    assert second.json() == first.json() and second["Idempotent-Replayed"] == "true"
    assert Template.objects.count() == 1


@pytest.mark.django_db
def test_same_key_with_a_different_body_is_a_409(api):
    key = str(uuid.uuid4())
    _post(api, BODY, key)
    response = _post(api, {**BODY, "name": "other"}, key)
    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
    _flush_fast_path()
    assert _post(api, {**BODY, "name": "other"}, key).status_code == 409
    assert Template.objects.count() == 1


@pytest.mark.django_db
def test_keys_are_scoped_to_the_client(api):
    _, other_key = service_create(name="other")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    _post(api, BODY, "shared")
    assert _post(other, {**BODY, "name": "second"}, "shared").status_code == 201


@pytest.mark.django_db
def test_a_failed_first_request_is_not_kept(api):
    key = str(uuid.uuid4())
    assert _post(api, {**BODY, "subject": "a\r\nBcc: x"}, key).status_code == 400
    assert _post(api, BODY, key).status_code == 201
    assert IdempotencyRecord.objects.get().status_code == 201


@pytest.mark.django_db
def test_an_expired_key_runs_again(api):
    _post(api, BODY, "k1")
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    _flush_fast_path()
    assert _post(api, {**BODY, "name": "again"}, "k1").status_code == 201
    assert Template.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "a\nb"])
def test_malformed_keys_are_a_400_naming_the_header(api, key):
    response = _post(api, BODY, key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["fields"]
    assert not Template.objects.exists()


@pytest.mark.django_db
def test_messages_honour_the_header_and_the_body_key(api, otp_template):
    body = {"to": "ada@example.com", "template": "otp", "context": {"name": "A", "code": "1"}}
    first = _post(api, body, "m-1", "/api/v1/messages")
    second = _post(api, body, "m-1", "/api/v1/messages")
    assert first.status_code == second.status_code == 202 and first.json() == second.json()
    assert _post(api, {**body, "to": "bob@example.com"}, "m-1", "/api/v1/messages").status_code == 409
    with_body_key = {**body, "idempotency_key": "order-7"}
    assert api.post("/api/v1/messages", with_body_key, format="json").json() == \
        api.post("/api/v1/messages", with_body_key, format="json").json()
    assert EmailMessage.objects.count() == 2


@pytest.mark.django_db
def test_a_record_an_older_release_left_in_progress_is_taken_over(api):
    _post(api, BODY, "crash")
    IdempotencyRecord.objects.update(status_code=None, response_body=None)
    TemplateVersion.objects.all().delete()
    Template.objects.all().delete()
    _flush_fast_path()
    assert _post(api, BODY, "crash").status_code == 201
    assert Template.objects.count() == 1


def _hold_record(key: str) -> psycopg2.extensions.connection:
    """A first request still running: its record inserted in a transaction not yet committed."""
    canonical = json.dumps(BODY, sort_keys=True, separators=(",", ":"))
    fingerprint = hashlib.sha256(f"POST /api/v1/templates\n{canonical}".encode()).hexdigest()
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    held = psycopg2.connect(**params)
    with held.cursor() as cursor:
        cursor.execute(
            "INSERT INTO clients_idempotencyrecord (client_id, key, fingerprint, locked_at, "
            "created_at, expires_at) VALUES (%s, %s, %s, now(), now(), now() + interval '1 hour')",
            (Service.objects.get().pk, key, fingerprint))
    return held


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_of_a_running_request_waits_then_is_a_409_with_retry_after(api, settings):
    settings.NOTIFIER_IDEMPOTENCY_WAIT_SECONDS = 0.3
    held = _hold_record("busy")
    # The first request "dies" after 5 s at the latest, so a server that waits without a bound
    # fails this test instead of hanging it.
    dies = threading.Timer(5, held.rollback)
    dies.start()
    try:
        started = time.monotonic()
        response = _post(api, BODY, "busy")
        waited = time.monotonic() - started
    finally:
        dies.cancel()
        held.rollback()
        held.close()
    assert response.status_code == 409 and response["Retry-After"] == "1"
    assert "in progress" in response.json()["error"]["message"]
    assert 0.3 <= waited < 5
    assert not Template.objects.exists()
    # The first request died (rolled back): the key is free at once, no lease to wait out.
    assert _post(api, BODY, "busy").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_a_first_request_that_dies_leaves_no_record(api, monkeypatch):
    def die(**kwargs):
        raise ConnectionResetError("the worker lost its database mid-request")

    monkeypatch.setattr("templates.api.template_create", die)
    assert _post(api, BODY, "dies").status_code == 500
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_run_once_and_the_others_replay_it(live_server):
    _, key = service_create(name="svc", rate_limit="10000/min")
    headers = {"Authorization": f"Api-Key {key}", "Idempotency-Key": "race-1"}

    def call(_: int) -> requests.Response:
        return requests.post(f"{live_server.url}/api/v1/templates", json=BODY, headers=headers,
                             timeout=30)

    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(call, range(16)))
    assert Template.objects.count() == 1
    assert [r.status_code for r in responses] == [201] * 16
    created = [r for r in responses if "Idempotent-Replayed" not in r.headers]
    assert len(created) == 1
    assert {r.json()["id"] for r in responses} == {created[0].json()["id"]}


class _CreateView(IdempotentMixin, APIView):
    def post(self, request):
        template = Template.objects.create(client=factories.owner(), name=request.data["name"])
        return Response({"id": template.id}, status=status.HTTP_201_CREATED)


@pytest.mark.django_db
def test_the_mixin_makes_any_post_idempotent():
    client, _ = service_create(name="svc")

    def call(name: str):
        request = APIRequestFactory().post("/x", {"name": name}, format="json",
                                           HTTP_IDEMPOTENCY_KEY="mix")
        force_authenticate(request, user=Caller.of_service(client))
        return _CreateView.as_view()(request)

    assert call("a").data == call("a").data
    assert call("b").status_code == 409
    assert Template.objects.count() == 1
