"""What operators see of callback endpoints: the dashboard panel and the admin pages."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from analytics.metrics import metrics_cache_clear
from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.endpoints import endpoint_create
from eventlog.models import RecordedEventTypes
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    return client


def _endpoint(url: str) -> WebhookEndpoint:
    return endpoint_create(service_id=factories.owner().pk, url=url, event_types=["message.bounced"])


def test_the_dashboard_shows_disabled_and_failing_endpoints(superuser_client):
    dead = _endpoint("https://dead.example.com/hooks")
    WebhookEndpoint.objects.filter(pk=dead.pk).update(enabled=False, disabled_reason="failing",
                                                      disabled_at=timezone.now())
    failing = _endpoint("https://flaky.example.com/hooks")
    WebhookEndpoint.objects.filter(pk=failing.pk).update(failing_since=timezone.now(), failed_attempts=4)
    page = superuser_client.get("/dashboard/").content.decode()
    assert "2 endpoints,\n    1 failing, 1 disabled" in page
    assert "dead.example.com" in page and "4 failures since" in page
    data = superuser_client.get("/dashboard/data.json").json()["callbacks"]
    assert [e["id"] for e in data["disabled"]] == [dead.pk] and data["failing_count"] == 1
    metrics_cache_clear()
    scrape = superuser_client.get("/metrics").content.decode()
    assert 'notifier_callback_endpoints{state="disabled_failing"} 1.0' in scrape
    assert 'notifier_callback_endpoints{state="failing"} 1.0' in scrape


def test_the_admin_lists_endpoints_without_secrets_and_enables_them(superuser_client):
    endpoint = _endpoint("https://hooks.example.com/a")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False, disabled_reason="failing")
    EndpointDelivery.objects.create(endpoint=endpoint, attempt=1, event_ids=[1], status_code=500,
                                    latency_ms=2)
    for url in ("/admin/callbacks/webhookendpoint/", "/admin/callbacks/endpointdelivery/",
                f"/admin/callbacks/webhookendpoint/{endpoint.pk}/change/"):
        response = superuser_client.get(url)
        assert response.status_code == 200, url
        assert endpoint.secret not in response.content.decode()
    superuser_client.post("/admin/callbacks/webhookendpoint/",
                          {"action": "enable", "_selected_action": [endpoint.pk]})
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).enabled
    assert RecordedEventTypes.objects.get(service=factories.owner()).types == ["message.bounced"]
