"""Issue 12: bad input is a 400 naming the field, never a 500, and nothing is written.

NUL (PostgreSQL stores it in neither text nor jsonb) and lone surrogates (not encodable as
UTF-8) anywhere in a JSON body, in a query parameter or in a path segment; a forged cursor.
"""

from __future__ import annotations

import json

import pytest

from audience.models import Contact, Segment, Suppression
from campaigns.models import Campaign
from delivery.models import EmailMessage
from tests import factories

pytestmark = pytest.mark.django_db
NUL = "\u0000"
SURROGATE = "\ud800"


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("transactional.services.messages_enqueue", lambda **kwargs: None)


@pytest.fixture
def template(db):
    return factories.template_version(subject="Hi {{ name }}", html_body="<p>Hi {{ name }}</p>")


def _campaign(template_id: int, **change) -> dict:
    inline = {"type": "inline", "contacts": [{"email": "ada@example.com", "name": "Ada"}]}
    return {"template_id": template_id, "priority": "low", "recipients": inline, **change}


def _inline_with_data(template_id: int) -> dict:
    contact = {"email": "ada@example.com", "name": "Ada", "data": {"plan": f"pro{NUL}"}}
    return _campaign(template_id, recipients={"type": "inline", "contacts": [contact]})


# (path, body builder, the JSON path the 400 must name)
BODIES = [
    ("/api/v1/contacts/bulk", lambda t: {"contacts": [{"email": "a@x.io", "name": f"A{NUL}"}]},
     "contacts[0].name"),
    ("/api/v1/contacts/bulk",
     lambda t: {"contacts": [{"email": "a@x.io", "attributes": {"plan": f"p{NUL}"}}]},
     "contacts[0].attributes.plan"),
    ("/api/v1/contacts/bulk",
     lambda t: {"contacts": [{"email": "a@x.io", "attributes": {f"k{NUL}": "v"}}]},
     "contacts[0].attributes"),
    ("/api/v1/segments", lambda t: {"name": "s", "definition": {"conditions": [
        {"attribute": "plan", "op": "equals", "value": f"pro{NUL}"}]}},
     "definition.conditions[0].value"),
    ("/api/v1/notifications/email", lambda t: _campaign(t, metadata={"team": f"g{NUL}"}),
     "metadata.team"),
    ("/api/v1/notifications/email", _inline_with_data, "recipients.contacts[0].data.plan"),
    ("/api/v1/messages", lambda t: {"to": "ada@example.com", "template": str(t),
                                    "context": {"name": SURROGATE}}, "context.name"),
    ("/api/v1/messages", lambda t: {"to": "ada@example.com", "template": str(t),
                                    "context": {"name": f"A{NUL}"}}, "context.name"),
]


def _nothing_written() -> bool:
    return not any(model.objects.exists()
                   for model in (Contact, Segment, Campaign, EmailMessage, Suppression))


def _assert_400(response, field: str) -> None:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"], error


@pytest.mark.parametrize(("path", "body", "field"), BODIES)
def test_nul_or_lone_surrogate_in_a_body_is_a_400_naming_the_json_path(api, template, path, body, field):
    raw = json.dumps(body(template.template_id))  # ensure_ascii: \u0000 and \ud800 as escapes
    _assert_400(api.post(path, raw, content_type="application/json"), field)
    assert _nothing_written()


QUERIES = [
    ("/api/v1/suppressions?email=a%00b", "email"),
    ("/api/v1/suppressions?after=a%00", "after"),
    ("/api/v1/campaigns?status=SENT%00", "status"),
    ("/api/v1/templates/{template}/preview?contact=a%00b", "contact"),
]


@pytest.mark.parametrize(("url", "field"), QUERIES)
def test_nul_in_a_query_parameter_is_a_400_naming_it(api, template, url, field):
    _assert_400(api.get(url.format(template=template.template_id)), field)


@pytest.mark.parametrize("method", ["get", "delete"])
def test_nul_in_a_path_segment_is_a_400(api, method):
    Suppression.objects.create(email="a@x.io", reason="manual")
    _assert_400(getattr(api, method)("/api/v1/suppressions/a%00@x.io"), "path")
    assert Suppression.objects.count() == 1


@pytest.mark.parametrize("cursor", ["cD0nIE9SIDE9MS0t", "cD0xZTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5",
                                    "not-base64!", "cj0xJnA9eA=="])
def test_a_forged_cursor_is_a_400_invalid_cursor(api, template, cursor):
    _assert_400(api.get(f"/api/v1/templates?cursor={cursor}"), "cursor")


def test_a_valid_cursor_still_pages(api, template):
    for name in ("b", "c"):
        factories.template_version(name=name)
    first = api.get("/api/v1/templates?page_size=2").json()
    assert first["next"]
    second = api.get(first["next"])
    assert second.status_code == 200 and len(second.json()["results"]) == 1


@pytest.mark.parametrize("url", [
    "/api/v1/suppressions?email={long}", "/api/v1/suppressions?after={long}",
    "/api/v1/campaigns?status={long}&before={long}", "/api/v1/templates?cursor={long}",
    "/api/v1/templates/{template}/preview?contact={long}", "/api/v1/suppressions/{long}",
])
def test_overlong_query_values_and_path_segments_are_never_a_500(api, template, url):
    response = api.get(url.format(long="x" * 100_000, template=template.template_id))
    assert response.status_code < 500, response.content[:300]
