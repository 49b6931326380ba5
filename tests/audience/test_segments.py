"""Segment definitions compile to SQL that selects the right contacts; bad ones name the part."""

from __future__ import annotations

import pytest
from django.db import connection

from audience.models import Contact
from audience.segments import SegmentError, segment_compile
from campaigns.audience import CONTACT_TABLE
from tests import factories

pytestmark = pytest.mark.django_db


def _emails(definition: dict) -> set[str]:
    compiled = segment_compile(definition)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT c.email FROM {CONTACT_TABLE} c WHERE {compiled.sql}", compiled.params)
        return {row[0] for row in cursor.fetchall()}


@pytest.fixture
def people(db):
    Contact.objects.create(client=factories.owner(), email="a@x.io", timezone="Europe/Paris",
                           attributes={"plan": "pro", "orders": 5})
    Contact.objects.create(client=factories.owner(), email="b@x.io", timezone="America/New_York",
                           attributes={"plan": "free", "orders": 1})
    Contact.objects.create(client=factories.owner(), email="c@x.io", timezone="Europe/Paris",
                           subscribed=False,
                           attributes={"plan": "team", "orders": "12"})
    Contact.objects.create(client=factories.owner(), email="d@x.io", attributes={"orders": "many"})


def test_equals_in_and_greater_than_on_attributes(people):
    assert _emails({"conditions": [{"attribute": "plan", "op": "equals", "value": "pro"}]}) == {"a@x.io"}
    assert _emails({"conditions": [{"attribute": "plan", "op": "in", "value": ["pro", "team"]}]}) == {
        "a@x.io", "c@x.io"}
    # Numbers stored as JSON numbers or numeric strings compare; "many" is simply not a number.
    assert _emails({"conditions": [{"attribute": "orders", "op": "gt", "value": 2}]}) == {"a@x.io", "c@x.io"}


def test_fields_subscribed_timezone_created_and_any(people):
    assert _emails({"match": "all", "conditions": [
        {"field": "subscribed", "op": "equals", "value": True},
        {"field": "timezone", "op": "equals", "value": "Europe/Paris"},
        {"field": "created_at", "op": "within_days", "value": 1},
    ]}) == {"a@x.io"}
    assert _emails({"match": "any", "conditions": [
        {"attribute": "plan", "op": "equals", "value": "free"},
        {"match": "all", "conditions": [{"field": "email", "op": "in", "value": ["D@X.IO"]}]},
    ]}) == {"b@x.io", "d@x.io"}


@pytest.mark.parametrize(("definition", "path"), [
    ({"conditions": [{"attribute": "plan", "op": "like", "value": "x"}]}, "definition.conditions[0].op"),
    ({"conditions": [{"field": "password", "op": "equals", "value": "x"}]}, "definition.conditions[0].field"),
    ({"conditions": [{"attribute": "x'; drop", "op": "equals", "value": 1}]},
     "definition.conditions[0].attribute"),
    ({"conditions": [{"attribute": "orders", "op": "gt", "value": "3"}]}, "definition.conditions[0].value"),
    ({"conditions": [{"field": "timezone", "op": "equals", "value": "Mars/Base"}]},
     "definition.conditions[0].value"),
    ({"conditions": []}, "definition.conditions"),
    ({"match": "some", "conditions": [{"field": "subscribed", "op": "equals", "value": True}]},
     "definition.match"),
])
def test_invalid_definitions_name_the_bad_part(definition, path):
    with pytest.raises(SegmentError) as caught:
        segment_compile(definition)
    assert caught.value.path == path
