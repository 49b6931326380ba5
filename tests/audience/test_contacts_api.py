"""POST /contacts/bulk (per-row errors, valid rows kept, upsert), lists, segments, suppressions."""

from __future__ import annotations

import pytest

from audience.models import Contact, ContactList, Segment, Suppression
from tests import factories

pytestmark = pytest.mark.django_db


def test_bulk_keeps_valid_rows_reports_bad_ones_and_upserts(api):
    Contact.objects.create(client=factories.owner(), email="old@x.io", name="Old",
                           attributes={"a": 1, "b": 1})
    rows = [
        {"email": "New@X.io", "name": "New", "timezone": "Europe/Paris", "attributes": {"plan": "pro"}},
        {"email": "not-an-email"},
        {"email": "old@x.io", "attributes": {"b": 2}},
        {"email": "tz@x.io", "timezone": "Mars/Base"},
        "a string",
    ]
    response = api.post("/api/v1/contacts/bulk", {"contacts": rows, "list": "vip"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["created"], body["updated"]) == (1, 1)
    assert [(e["index"], sorted(e["errors"])) for e in body["errors"]] == [
        (1, ["email"]), (3, ["timezone"]), (4, ["non_field_errors"])]
    new = Contact.objects.get(email="new@x.io")
    assert (new.name, new.timezone, new.attributes) == ("New", "Europe/Paris", {"plan": "pro"})
    old = Contact.objects.get(email="old@x.io")
    assert (old.name, old.attributes) == ("Old", {"a": 1, "b": 2})  # name kept, attributes merged
    assert set(ContactList.objects.get(name="vip").contacts.values_list("email", flat=True)) == {
        "new@x.io", "old@x.io"}


def test_bulk_over_10000_rows_is_413_and_writes_nothing(api):
    rows = [{"email": f"u{i}@x.io"} for i in range(10_001)]
    response = api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json")
    assert response.status_code == 413
    assert "10000" in response.json()["error"]["message"]
    assert Contact.objects.count() == 0


def test_bulk_10000_rows_in_one_call(api):
    rows = [{"email": f"u{i}@x.io", "attributes": {"i": i}} for i in range(10_000)]
    response = api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json")
    assert response.status_code == 200
    assert response.json()["created"] == 10_000
    assert Contact.objects.count() == 10_000


def test_segment_create_validates_definition(api):
    bad = {"name": "s", "definition": {"conditions": [{"attribute": "plan", "op": "nope", "value": 1}]}}
    response = api.post("/api/v1/segments", bad, format="json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"definition.conditions[0].op"}
    assert not Segment.objects.exists()
    condition = {"attribute": "plan", "op": "equals", "value": "pro"}
    good = {"name": "pro", "definition": {"conditions": [condition]}}
    response = api.post("/api/v1/segments", good, format="json")
    assert response.status_code == 201 and response.json()["empty"] is True


def test_suppressions_api(api):
    assert api.post("/api/v1/suppressions", {"email": "Bad@X.io", "reason": "complaint"},
                    format="json").status_code == 201
    assert api.post("/api/v1/suppressions", {"email": "bad@x.io"}, format="json").status_code == 200
    assert api.post("/api/v1/suppressions", {"email": "nope"}, format="json").status_code == 400
    listed = api.get("/api/v1/suppressions").json()["results"]
    assert [(s["email"], s["reason"]) for s in listed] == [("bad@x.io", "complaint")]
    assert api.delete("/api/v1/suppressions/BAD@x.io").status_code == 204
    assert api.delete("/api/v1/suppressions/bad@x.io").status_code == 404
    assert not Suppression.objects.exists()
