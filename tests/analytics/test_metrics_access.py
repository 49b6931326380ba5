"""/metrics access: the bearer token when one is set; loopback peers only when none is."""

from __future__ import annotations

import pytest
import yaml
from django.conf import settings as django_settings

from analytics.metrics import metrics_cache_clear

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-metrics-token"


@pytest.fixture(autouse=True)
def _fresh_scrape():
    # A scrape is cached per process: do not hand this file's numbers to the next test.
    yield
    metrics_cache_clear()


def test_a_scrape_without_the_token_is_refused(client, settings):
    settings.NOTIFIER_METRICS_TOKEN = TOKEN
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": f"Basic {TOKEN}"}):
        response = client.get("/metrics", **headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"notifier_queue" not in response.content


def test_a_scrape_with_the_token_gets_the_metrics(client, settings):
    settings.NOTIFIER_METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert b"notifier_queue_pending_messages" in response.content


def test_without_a_token_only_loopback_peers_may_scrape(client, settings):
    settings.NOTIFIER_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    remote = client.get("/metrics", REMOTE_ADDR="203.0.113.7")
    assert remote.status_code == 401
    assert b"NOTIFIER_METRICS_TOKEN" in remote.content


def test_compose_publishes_flower_on_loopback_with_basic_auth():
    compose = yaml.safe_load((django_settings.BASE_DIR / "docker-compose.yml").read_text())
    flower = compose["services"]["flower"]
    assert all(str(port).startswith("127.0.0.1:") for port in flower["ports"])
    assert "FLOWER_BASIC_AUTH" in flower["environment"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")
