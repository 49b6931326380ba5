"""POST/GET/PATCH/DELETE /api/v1/webhooks: validation (SSRF), the secret once, tenancy, and the
event log's recorded types kept to the union of the service's endpoints (decision 113)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.dispatch import deliveries_expire
from clients.services import service_create
from eventlog.models import RecordedEventTypes
from tests import factories

pytestmark = pytest.mark.django_db

URL = "https://127.0.0.1:9443/hooks"


def _create(api: APIClient, url: str = URL, events: list[str] | None = None) -> dict:
    response = api.post("/api/v1/webhooks", {"url": url, "events": events or ["message.delivered"]},
                        format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _recorded() -> list[str]:
    row = RecordedEventTypes.objects.filter(service=factories.owner()).first()
    return row.types if row else []


def test_the_secret_is_answered_on_create_and_never_again(api):
    created = _create(api, events=["message.bounced", "message.delivered"])
    assert created["secret"].startswith("whsec_") and created["enabled"] is True
    assert created["events"] == ["message.delivered", "message.bounced"]  # the log's order
    listed = api.get("/api/v1/webhooks").json()
    assert [e["id"] for e in listed] == [created["id"]] and "secret" not in listed[0]
    assert "secret" not in api.get(f"/api/v1/webhooks/{created['id']}").json()


def test_recorded_types_follow_the_union_of_the_endpoints(api):
    first = _create(api, events=["message.delivered"])
    second = _create(api, events=["message.bounced", "message.delivered"])
    assert _recorded() == ["message.delivered", "message.bounced"]
    api.patch(f"/api/v1/webhooks/{second['id']}", {"events": ["message.complained"]}, format="json")
    assert _recorded() == ["message.delivered", "message.complained"]
    # A disabled endpoint keeps its types recorded: enabled again, it catches up from the log.
    api.patch(f"/api/v1/webhooks/{first['id']}", {"enabled": False}, format="json")
    assert _recorded() == ["message.delivered", "message.complained"]
    assert api.delete(f"/api/v1/webhooks/{first['id']}").status_code == 204
    assert _recorded() == ["message.complained"]
    api.delete(f"/api/v1/webhooks/{second['id']}")
    assert _recorded() == []


@pytest.mark.parametrize("url, allow_loopback, why", [
    ("http://hooks.example.com/x", False, "https"),
    ("https://127.0.0.1/x", False, "loopback"),
    ("https://10.1.2.3/x", False, "private"),
    ("https://[::1]/x", False, "loopback"),
    ("https://localhost:8443/x", False, "loopback"),  # resolved at registration
    ("https://169.254.169.254/latest", True, "link-local"),  # cloud metadata: never
    ("https://0.0.0.0/x", True, "unspecified"),
    ("https://user:pw@hooks.example.com/x", True, "credentials"),
    ("ftp://hooks.example.com/x", True, "https"),
    ("not a url", True, "valid URL"),
])
def test_a_refused_url_is_a_400_naming_url_and_writes_nothing(api, settings, url, allow_loopback, why):
    settings.NOTIFIER_CALLBACKS_ALLOW_LOOPBACK = allow_loopback
    response = api.post("/api/v1/webhooks", {"url": url, "events": ["message.sent"]}, format="json")
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    assert list(fields) == ["url"] and why in fields["url"][0], fields
    assert not WebhookEndpoint.objects.exists() and _recorded() == []


def test_loopback_and_plain_http_are_allowed_where_the_setting_says(api, settings):
    settings.NOTIFIER_CALLBACKS_ALLOW_LOOPBACK = True
    assert _create(api, url="http://127.0.0.1:8080/hooks")["url"] == "http://127.0.0.1:8080/hooks"


@pytest.mark.parametrize("body, field", [
    ({"url": URL, "events": ["message.nope"]}, "events[0]"),
    ({"url": URL, "events": []}, "events"),
    ({"url": URL}, "events"),
    ({"url": URL, "events": ["message.sent"], "secret": "mine"}, "secret"),
])
def test_bad_input_is_a_400_naming_the_field(api, body, field):
    response = api.post("/api/v1/webhooks", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"], response.json()
    assert not WebhookEndpoint.objects.exists()


def test_another_services_endpoints_are_invisible(api):
    other, other_key = service_create(name="other-service")
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    created = _create(theirs)
    assert api.get("/api/v1/webhooks").json() == []
    for method, path in [("get", ""), ("patch", ""), ("delete", ""), ("get", "/deliveries"),
                         ("post", "/rotate-secret"), ("post", "/replay")]:
        response = getattr(api, method)(f"/api/v1/webhooks/{created['id']}{path}", {}, format="json")
        assert response.status_code == 404, (method, path, response.status_code)
    assert WebhookEndpoint.objects.get(pk=created["id"]).service_id == other.pk


def test_rotation_answers_a_new_secret_and_keeps_the_old_one_for_the_overlap(api):
    created = _create(api)
    rotated = api.post(f"/api/v1/webhooks/{created['id']}/rotate-secret").json()
    assert rotated["secret"] != created["secret"] and rotated["previous_secret_expires_at"]
    endpoint = WebhookEndpoint.objects.get(pk=created["id"])
    assert endpoint.previous_secret == created["secret"] and endpoint.secret == rotated["secret"]


def test_the_delivery_log_is_cursor_paginated_newest_first(api):
    created = _create(api)
    for attempt in range(1, 6):
        EndpointDelivery.objects.create(endpoint_id=created["id"], attempt=attempt, event_ids=[attempt],
                                        status_code=500, latency_ms=3, error="HTTP 500")
    page = api.get(f"/api/v1/webhooks/{created['id']}/deliveries?page_size=3").json()
    assert [d["attempt"] for d in page["results"]] == [5, 4, 3]
    rest = api.get(page["next"]).json()
    assert [d["attempt"] for d in rest["results"]] == [2, 1] and rest["next"] is None
    bad = api.get(f"/api/v1/webhooks/{created['id']}/deliveries?cursor=zzz")
    assert bad.status_code == 400 and "cursor" in bad.json()["error"]["fields"]


def test_replay_needs_one_starting_point_and_an_enabled_endpoint(api):
    created = _create(api)
    path = f"/api/v1/webhooks/{created['id']}/replay"
    assert api.post(path, {}, format="json").status_code == 400
    both = api.post(path, {"since": "2026-01-01T00:00:00Z", "event_id": 1}, format="json")
    assert both.status_code == 400 and "since" in both.json()["error"]["fields"]
    assert api.post(path, {"since": "2026-01-01T00:00:00Z"}, format="json").status_code == 200
    api.patch(f"/api/v1/webhooks/{created['id']}", {"enabled": False}, format="json")
    assert api.post(path, {"since": "2026-01-01T00:00:00Z"}, format="json").status_code == 409


def test_the_delivery_log_forgets_rows_past_its_retention(api, settings):
    created = _create(api)
    old, new = (EndpointDelivery.objects.create(endpoint_id=created["id"], attempt=1, event_ids=[n],
                                                status_code=200, latency_ms=1) for n in (1, 2))
    EndpointDelivery.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    settings.NOTIFIER_CALLBACKS_LOG_DAYS = 7
    assert deliveries_expire() == 1
    assert list(EndpointDelivery.objects.values_list("pk", flat=True)) == [new.pk]
