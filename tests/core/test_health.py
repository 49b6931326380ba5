import pytest
from django.test import override_settings

from core.redis_client import get_redis


@pytest.mark.django_db
def test_healthz_reports_every_dependency(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "redis": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_healthz_is_503_when_redis_is_unreachable(client):
    get_redis.cache_clear()
    try:
        with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
            response = client.get("/healthz")
    finally:
        get_redis.cache_clear()
    assert response.status_code == 503
    assert response.json()["checks"]["redis"].startswith("error")
    assert response.json()["checks"]["database"] == "ok"
