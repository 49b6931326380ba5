"""The campaign API: 202 at once, bad input named and nothing written, lifecycle 409s, preview."""

from __future__ import annotations

import pytest

from audience.models import Contact, Segment
from campaigns.models import Campaign
from delivery.models import EmailMessage
from tests import factories
from tests.campaigns.helpers import contacts_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def template(db):
    return factories.template_version(subject="Hi {{ name }}", html_body="<p>Plan {{ plan }}</p>")


@pytest.fixture
def segment(db) -> Segment:
    contacts_create(50, attributes={"plan": "pro"})
    return Segment.objects.create(client=factories.owner(), name="pro", definition={
        "conditions": [{"attribute": "plan", "op": "equals", "value": "pro"}]})


def _send(api, body: dict):
    return api.post("/api/v1/notifications/email", body, format="json")


def _nothing_written() -> bool:
    return not Campaign.objects.exists() and not EmailMessage.objects.exists()


def test_segment_campaign_is_accepted_and_fanout_is_published_after_commit(
    api, template, segment, django_capture_on_commit_callbacks
):
    body = {"campaign_id": "spring", "template_id": template.template_id,
            "recipients": {"type": "segment", "segment_id": segment.pk}, "priority": "low",
            "metadata": {"team": "growth"}}
    with django_capture_on_commit_callbacks() as callbacks:
        response = _send(api, body)
    assert response.status_code == 202, response.content
    assert len(callbacks) == 1  # the fan-out task, published once the campaign row commits
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])
    assert (campaign.status, campaign.priority, campaign.external_id) == ("QUEUED", 3, "spring")
    assert campaign.audience["definition"] == segment.definition  # a snapshot
    again = _send(api, body)  # the same caller label: the same campaign, nothing new
    assert again.json()["campaign_id"] == campaign.pk and again.headers["Idempotent-Replayed"] == "true"
    detail = api.get(f"/api/v1/campaigns/{campaign.pk}").json()
    assert detail["status"] == "QUEUED" and detail["counters"]["total"] == 0
    assert [c["campaign_id"] for c in api.get("/api/v1/campaigns").json()["results"]] == [campaign.pk]


@pytest.mark.parametrize(("recipients", "field"), [
    ({"type": "segment", "segment_id": 999}, "segment_id"),
    ({"type": "list", "list_id": 999}, "list_id"),
    ({"type": "carrier-pigeon"}, "type"),
    ({"type": "inline", "contacts": []}, "contacts"),
])
def test_bad_audiences_are_400_naming_the_field(api, template, recipients, field):
    response = _send(api, {"template_id": template.template_id, "recipients": recipients})
    assert response.status_code == 400, response.content
    assert f"recipients.{field}" in response.json()["error"]["fields"]
    assert _nothing_written()


def test_empty_audience_unknown_template_and_bad_priority(api, template):
    empty = Segment.objects.create(client=factories.owner(), name="none", definition={
        "conditions": [{"attribute": "plan", "op": "equals", "value": "nobody"}]})
    response = _send(api, {"template_id": template.template_id,
                           "recipients": {"type": "segment", "segment_id": empty.pk}})
    assert response.status_code == 400
    assert "empty" in response.json()["error"]["fields"]["recipients"][0]
    response = _send(api, {"template_id": "nope", "recipients": {"type": "segment", "segment_id": empty.pk},
                           "priority": "urgent"})
    assert set(response.json()["error"]["fields"]) == {"template_id", "priority"}
    assert _nothing_written()


def test_inline_rows_invalid_or_oversize(api, template):
    contacts = [{"email": "ok@x.io"}, {"email": "bad"}, {"email": "t@x.io", "timezone": "Nowhere/Town"}]
    response = _send(api, {"template_id": template.template_id,
                           "recipients": {"type": "inline", "contacts": contacts}})
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert set(fields) == {"recipients.contacts[1].email", "recipients.contacts[2].timezone"}, fields
    oversize = [{"email": f"u{i}@x.io"} for i in range(10_001)]
    response = _send(api, {"template_id": template.template_id,
                           "recipients": {"type": "inline", "contacts": oversize}})
    assert response.status_code == 413
    assert "list" in response.json()["error"]["message"]
    assert _nothing_written() and not Contact.objects.exists()


def test_lifecycle_actions_and_illegal_transitions(api, template, segment):
    audience = {"type": "segment", "segment_id": segment.pk}
    body = {"template_id": template.template_id, "recipients": audience}
    campaign_id = _send(api, body).json()["campaign_id"]
    assert api.post(f"/api/v1/campaigns/{campaign_id}/resume").status_code == 409
    assert api.post(f"/api/v1/campaigns/{campaign_id}/pause").json()["status"] == "PAUSED"
    assert api.post(f"/api/v1/campaigns/{campaign_id}/resume").json()["status"] == "QUEUED"
    assert api.post(f"/api/v1/campaigns/{campaign_id}/cancel").json()["status"] == "CANCELLED"
    response = api.post(f"/api/v1/campaigns/{campaign_id}/pause")
    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
    assert api.post("/api/v1/campaigns/999999/pause").status_code == 404


def test_test_send_and_preview(api, template, segment):
    audience = {"type": "segment", "segment_id": segment.pk}
    body = {"template_id": template.template_id, "recipients": audience}
    campaign_id = _send(api, body).json()["campaign_id"]
    response = api.post(f"/api/v1/campaigns/{campaign_id}/test",
                        {"emails": ["qa@x.io"], "data": {"plan": "test"}}, format="json")
    assert response.status_code == 202
    message = EmailMessage.objects.get(pk=response.json()["message_ids"][0])
    assert message.recipient == "qa@x.io" and message.campaign_id is None
    preview = api.get(f"/api/v1/templates/{template.template_id}/preview?contact=user3@example.com")
    assert preview.status_code == 200, preview.content
    assert preview.json()["subject"] == "Hi User 3" and "Plan pro" in preview.json()["html"]
    unknown = api.get(f"/api/v1/templates/{template.template_id}/preview?contact=x@nowhere.io")
    assert unknown.status_code == 404
