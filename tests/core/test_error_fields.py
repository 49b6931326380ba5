"""An error's `fields` is one flat mapping from the JSON path of each bad input to its messages
(`schedule.delay_seconds`, `recipients.contacts[1].email`), however deep the field sits."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db
OTP = {"to": "ada@example.com", "template": "otp", "context": {"name": "Ada", "code": "1"}}


def _fields(response) -> dict:
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    # Every value is the field's list of messages, never another level of fields.
    assert all(isinstance(messages, list) and all(isinstance(m, str) for m in messages)
               for messages in fields.values()), fields
    return fields


@pytest.mark.parametrize(("schedule", "path"), [
    ({"type": "delayed", "delay_seconds": 0}, "schedule.delay_seconds"),  # the serializer's check
    ({"type": "scheduled"}, "schedule.send_at"),                          # its validate()
    ({"type": "scheduled", "send_at": "2020-01-01T00:00:00Z"}, "schedule.send_at"),  # resolved
])
def test_a_bad_schedule_field_is_named_by_its_path(api, otp_template, schedule, path):
    response = api.post("/api/v1/messages", {**OTP, "schedule": schedule}, format="json")
    fields = _fields(response)
    assert list(fields) == [path]
    assert response.json()["error"]["message"] == f"Invalid input in: {path}."


def test_a_bad_row_of_a_list_is_named_by_its_index(api, otp_template):
    contacts = [{"email": "ok@example.com"}, {"email": "bad"}, {"email": "b@example.com", "x": 1}]
    body = {"template_id": "otp", "recipients": {"type": "inline", "contacts": contacts}}
    fields = _fields(api.post("/api/v1/notifications/email", body, format="json"))
    # A row's own problem (an unknown key) is named by the row, not by "non_field_errors".
    assert set(fields) == {"recipients.contacts[1].email", "recipients.contacts[2]"}, fields


def test_a_bad_segment_condition_is_named_once(api):
    body = {"name": "s", "definition": {"conditions": [{"attribute": "plan", "op": "nope", "value": 1}]}}
    fields = _fields(api.post("/api/v1/segments", body, format="json"))
    assert list(fields) == ["definition.conditions[0].op"]
