"""GET/PATCH /api/v1/service `retention` and the admin's form (issue 30, decision 120): the
defaults shown, any part set, a bad value a 400 naming its JSON path that writes nothing, a
personal retention shorter than a pending schedule refused (one-off rows and a scheduled
campaign), the `keys` scope, and the same rules in the admin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from audience.models import Stream
from campaigns.models import Campaign
from clients.models import Service
from clients.services import api_key_create, service_create
from delivery.models import EmailMessage
from tests import factories

pytestmark = pytest.mark.django_db
PATH = "/api/v1/service"
DEFAULT = {"transactional": {"personal_data_days": 7, "metadata_days": 90},
           "broadcast": {"personal_data_days": 7, "metadata_days": 90}}


@pytest.fixture(autouse=True)
def _defaults(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    settings.NOTIFIER_RETENTION_METADATA_DAYS = 90


def _patch(api, body):
    return api.patch(PATH, body, format="json")


def _stored() -> dict:
    return Service.objects.get(pk=factories.owner().pk).retention


def test_the_defaults_are_shown_and_any_part_is_set(api, settings):
    assert api.get(PATH).json()["retention"] == DEFAULT
    response = _patch(api, {"retention": {"broadcast": {"personal_data_days": 3}}})
    assert response.status_code == 200, response.content
    assert response.json()["retention"]["broadcast"] == {"personal_data_days": 3, "metadata_days": 90}
    _patch(api, {"retention": {"transactional": {"metadata_days": 30}}})
    assert _stored() == {"broadcast": {"personal_data_days": 3}, "transactional": {"metadata_days": 30}}
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 10  # a default follows the setting; a value set stays
    assert api.get(PATH).json()["retention"] == {
        "transactional": {"personal_data_days": 10, "metadata_days": 30},
        "broadcast": {"personal_data_days": 3, "metadata_days": 90}}


@pytest.mark.parametrize(("body", "field"), [
    ({"retention": {"broadcast": {"personal_data_days": 0}}}, "retention.broadcast.personal_data_days"),
    ({"retention": {"broadcast": {"personal_data_days": 3651}}}, "retention.broadcast.personal_data_days"),
    ({"retention": {"transactional": {"metadata_days": "many"}}}, "retention.transactional.metadata_days"),
    ({"retention": {"transactional": {"metadata_days": 5}}}, "retention.transactional.metadata_days"),
    ({"retention": {"broadcast": {"personal_data_days": 100}}}, "retention.broadcast.personal_data_days"),
    ({"retention": {"broadcast": {"personal_data_days": 10, "metadata_days": 9}}},
     "retention.broadcast.metadata_days"),
    ({"retention": {"sms": {"personal_data_days": 3}}}, "retention.sms"),
    ({"retention": {"broadcast": {"personal_days": 3}}}, "retention.broadcast.personal_days"),
    ({"retention": {"broadcast": 3}}, "retention.broadcast"),
    ({"name": "renamed"}, "name"),
    ({}, "retention"),
])
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(api, body, field):
    _patch(api, {"retention": {"broadcast": {"metadata_days": 60}}})
    response = _patch(api, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()
    assert _stored() == {"broadcast": {"metadata_days": 60}}


def test_a_retention_shorter_than_a_pending_one_off_schedule_is_refused(api):
    version = factories.template_version()
    waits = factories.email_message(version=version, client=factories.owner(), status="SCHEDULED",
                                    scheduled_for=timezone.now() + timedelta(days=9, hours=12))
    response = _patch(api, {"retention": {"transactional": {"personal_data_days": 5}}})
    assert response.status_code == 400, response.content
    message = response.json()["error"]["fields"]["retention.transactional.personal_data_days"][0]
    assert "pending schedule" in message and "at least 10" in message, message
    assert _stored() == {}
    # Another stream, or a long enough retention, is fine; so is the same once it was sent.
    assert _patch(api, {"retention": {"broadcast": {"personal_data_days": 5}}}).status_code == 200
    assert _patch(api, {"retention": {"transactional": {"personal_data_days": 10}}}).status_code == 200
    EmailMessage.objects.filter(pk=waits.pk).update(status="SENT")
    assert _patch(api, {"retention": {"transactional": {"personal_data_days": 1}}}).status_code == 200


def test_a_retention_shorter_than_a_scheduled_campaign_is_refused(api):
    now, owner, version = timezone.now(), factories.owner(), factories.template_version()
    send_at = (now + timedelta(days=20)).astimezone(UTC).isoformat()
    Campaign.objects.create(name="spring", client=owner, template_version=version,
                            status=Campaign.Status.SCHEDULED,
                            schedule={"type": "scheduled", "send_at": send_at})
    # A local-time campaign already compiled: its last zone's instant is what counts.
    due = {"UTC": (now + timedelta(days=1)).isoformat(),
           "Pacific/Honolulu": (now + timedelta(days=25)).isoformat()}
    Campaign.objects.create(name="local", client=owner, template_version=version,
                            status=Campaign.Status.SENDING,
                            schedule={"type": "local_time", "local_time": "09:00", "compiled": {
                                "type": "due_map", "default": due["UTC"], "due": due}})
    response = _patch(api, {"retention": {"broadcast": {"personal_data_days": 21}}})
    assert response.status_code == 400, response.content
    assert "at least 25" in response.json()["error"]["fields"]["retention.broadcast.personal_data_days"][0]
    assert _patch(api, {"retention": {"transactional": {"personal_data_days": 1}}}).status_code == 200
    assert _patch(api, {"retention": {"broadcast": {"personal_data_days": 26}}}).status_code == 200


def test_changing_it_takes_the_keys_scope_and_a_live_key(api):
    service = factories.owner()
    _, reader = api_key_create(service=service, name="reader", scopes=["analytics"])
    _, tester = api_key_create(service=service, name="tester", key_type="test")
    for key in (reader, tester):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
        assert client.get(PATH).json()["retention"] == DEFAULT
        assert _patch(client, {"retention": {"broadcast": {"personal_data_days": 3}}}).status_code == 403
    assert _stored() == {}


def test_the_admin_shows_and_edits_it_with_the_same_rules(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    service, _ = service_create(name="billing")
    # The admin escapes "_" in ids (svc_22... would read as svc" by hand): build the URL as it does.
    url = reverse("admin:clients_service_change", args=[quote(service.pk)])
    page = client.get(url)
    assert page.status_code == 200 and "retention_broadcast_personal_data_days" in page.content.decode()
    form = {"name": "billing", "scopes": service.scopes, "rate_limit": "", "endpoint_rate_limits": "{}",
            "retention_broadcast_personal_data_days": "3", "retention_transactional_metadata_days": "",
            **{f"{prefix}-{field}": value for prefix in ("api_keys", "team_members")
               for field, value in (("TOTAL_FORMS", "0"), ("INITIAL_FORMS", "0"))}}
    form["api_keys-INITIAL_FORMS"] = form["api_keys-TOTAL_FORMS"] = str(service.api_keys.count())
    for index, key in enumerate(service.api_keys.all()):
        form[f"api_keys-{index}-id"] = str(key.pk)
        form[f"api_keys-{index}-service"] = service.pk
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Service.objects.get(pk=service.pk).retention == {"broadcast": {"personal_data_days": 3}}
    factories.email_message(version=factories.template_version(client=service), client=service,
                            status="SCHEDULED", stream=Stream.BROADCAST,
                            scheduled_for=datetime.now(UTC) + timedelta(days=4))
    refused = client.post(url, {**form, "retention_broadcast_personal_data_days": "2"})
    assert refused.status_code == 200 and "pending schedule" in refused.content.decode()
    assert Service.objects.get(pk=service.pk).retention == {"broadcast": {"personal_data_days": 3}}
    kept = client.post(url, {**form, "retention_broadcast_personal_data_days": ""})  # back to the default
    assert kept.status_code == 302
    assert Service.objects.get(pk=service.pk).retention == {}
