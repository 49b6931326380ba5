"""F19 in one process: per-client limits, 429 + Retry-After, identity from the key, 503 on outage."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clients.services import service_create
from core.lua import script
from core.redis_client import get_redis
from testkit.ports import free_port

pytestmark = pytest.mark.django_db
URL = "/api/v1/messages/999999"   # a cheap authenticated GET (404); it still counts


def _api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def test_limited_client_gets_429_with_retry_after_and_others_are_untouched():
    _, limited_key = service_create(name="flood", rate_limit="3/min")
    _, other_key = service_create(name="calm", rate_limit="100/min")
    limited, other = _api(limited_key), _api(other_key)
    responses = [limited.get(URL) for _ in range(5)]
    assert [r.status_code for r in responses] == [404, 404, 404, 429, 429]
    assert [r["RateLimit-Remaining"] for r in responses] == ["2", "1", "0", "0", "0"]
    assert responses[0]["RateLimit-Limit"] == "3" and responses[0]["RateLimit-Policy"] == "3;w=60"
    refused = limited.get(URL)
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "rate_limited"
    assert all(other.get(URL).status_code == 404 for _ in range(10))


def test_identity_comes_from_the_key_not_forwarded_headers():
    _, key = service_create(name="flood", rate_limit="2/min")
    api = _api(key)
    codes = [api.get(URL, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}", REMOTE_ADDR=f"10.1.0.{n}").status_code
             for n in range(4)]
    assert codes == [404, 404, 429, 429]


def test_endpoint_classes_have_their_own_rates_and_windows(settings):
    settings.NOTIFIER_API_RATES = {"send": "1/min"}
    _, key = service_create(name="svc", endpoint_rate_limits={"default": "2/min"})
    api = _api(key)
    # POST /api/v1/messages is class "send": the settings' 1/min applies (no client override).
    assert api.post("/api/v1/messages", {}, format="json").status_code == 400
    assert api.post("/api/v1/messages", {}, format="json").status_code == 429
    # POST /api/v1/templates is class "templates": its own window, the default rate.
    assert api.post("/api/v1/templates", {}, format="json").status_code == 400


@pytest.fixture
def redis_down(settings):
    """Point the shared client at a port where nothing listens: a real refused connection."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    get_redis.cache_clear()
    script.cache_clear()
    yield
    get_redis.cache_clear()
    script.cache_clear()


def test_redis_down_is_a_503_in_the_error_shape_not_a_500(redis_down):
    _, key = service_create(name="svc")
    response = _api(key).get(URL)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
    assert response["Retry-After"]
