"""The Redis circuit breaker's state machine, shared through real Redis."""

from __future__ import annotations

import time

import pytest
import redis

from delivery.selectors import circuit_breakers_list
from delivery.services import circuit_breaker as cb
from delivery.services.circuit_breaker import Decision


def allow(*, provider: str) -> Decision:
    return cb.breaker_check(provider=provider)[0]


@pytest.fixture(autouse=True)
def fast_breaker(settings):
    settings.NOTIFIER_BREAKER_FAILURES = 3
    settings.NOTIFIER_BREAKER_WINDOW_SECONDS = 5
    settings.NOTIFIER_BREAKER_COOLDOWN_SECONDS = 0.3
    settings.NOTIFIER_BREAKER_PROBE_SECONDS = 0.5
    settings.NOTIFIER_PROVIDERS = ["ses", "sendgrid"]


def test_opens_after_a_burst_then_denies():
    for _ in range(2):
        cb.breaker_record_failure(provider="ses")
    assert allow(provider="ses") is Decision.ALLOW
    cb.breaker_record_failure(provider="ses")
    assert allow(provider="ses") is Decision.DENY
    assert allow(provider="sendgrid") is Decision.ALLOW


def test_success_resets_the_failure_count():
    cb.breaker_record_failure(provider="ses")
    cb.breaker_record_failure(provider="ses")
    cb.breaker_record_success(provider="ses")
    cb.breaker_record_failure(provider="ses")
    assert allow(provider="ses") is Decision.ALLOW


def test_one_probe_after_cooldown_then_closes_on_success():
    for _ in range(3):
        cb.breaker_record_failure(provider="ses")
    time.sleep(0.35)
    assert allow(provider="ses") is Decision.PROBE
    assert allow(provider="ses") is Decision.DENY  # another worker: no second probe
    cb.breaker_record_success(provider="ses")
    assert allow(provider="ses") is Decision.ALLOW
    [state] = [b for b in circuit_breakers_list() if b.provider == "ses"]
    assert state.state == "closed"
    assert [t.split(" ", 1)[1] for t in state.transitions] == [
        "half_open -> closed (success)", "open -> half_open (cooldown over)",
        "closed -> open (3 failures in 5000 ms)"]


def test_failed_probe_reopens():
    for _ in range(3):
        cb.breaker_record_failure(provider="ses")
    time.sleep(0.35)
    assert allow(provider="ses") is Decision.PROBE
    cb.breaker_record_failure(provider="ses")
    assert allow(provider="ses") is Decision.DENY
    assert circuit_breakers_list()[0].state == "open"


def test_retry_after_holds_it_open_that_long():
    cb.breaker_record_failure(provider="ses", retry_after=1.0)
    time.sleep(0.5)
    assert allow(provider="ses") is Decision.DENY
    time.sleep(0.6)
    assert allow(provider="ses") is Decision.PROBE


def test_fails_open_when_redis_is_unreachable(monkeypatch):
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    monkeypatch.setattr(cb, "script", lambda name: dead.register_script("return 1"))
    cb.breaker_record_failure(provider="ses")
    assert allow(provider="ses") is Decision.ALLOW


@pytest.mark.django_db
def test_providers_api_shows_breaker_state(api, settings):
    settings.NOTIFIER_BREAKER_COOLDOWN_SECONDS = 30  # still open when a loaded machine answers
    for _ in range(3):
        cb.breaker_record_failure(provider="ses")
    response = api.get("/api/v1/providers")
    assert response.status_code == 200
    body = response.json()["providers"]
    assert [p["provider"] for p in body] == ["ses", "sendgrid"]
    assert body[0]["state"] == "open" and 0 < body[0]["open_for_seconds"] <= 30
    assert body[0]["transitions"][0].endswith("closed -> open (3 failures in 5000 ms)")
    assert body[1]["state"] == "closed"


@pytest.mark.django_db
def test_providers_api_needs_a_key(client):
    assert client.get("/api/v1/providers").status_code in (401, 403)
