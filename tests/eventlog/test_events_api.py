"""GET /api/v1/events: the caller's own events after a cursor, `since`, `types`, `limit`, a
`next` that is always there, 400s naming the field, another service's events never shown."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from clients.services import service_create
from eventlog.models import ServiceEvent
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/events"


def _record(service_id: str, message_id: int, event_type: str = "message.sent") -> ServiceEvent:
    return ServiceEvent.objects.create(service_id=service_id, type=event_type, message_id=message_id,
                                       occurred_at=timezone.now(), data={"recipient": f"{message_id}@x.org"})


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def _read_all(api: APIClient, query: dict, expected: int) -> tuple[list[dict], str]:
    """Follow `next` until `expected` events were read (the horizon is the cluster's oldest
    running transaction: another test database's may hold it a moment), then one more page."""
    events: list[dict] = []
    deadline = time.monotonic() + 60
    while True:
        body = api.get(URL, query).json()
        assert "next" in body, body
        events += body["events"]
        query = {**{k: v for k, v in query.items() if k not in ("since", "after")}, "after": body["next"]}
        if len(events) >= expected and not body["events"]:
            return events, body["next"]
        if time.monotonic() > deadline:
            return events, body["next"]
        if not body["events"]:
            time.sleep(0.05)


def test_pages_follow_the_cursor_without_loss_or_repeat_and_next_is_always_there(api) -> None:
    service = factories.owner()
    written = [_record(service.pk, n).id for n in range(7)]
    events, following = _read_all(api, {"limit": 3}, 7)
    assert [int(e["id"]) for e in events] == written  # none lost, none twice, in commit order
    assert events[0]["type"] == "message.sent" and events[0]["message_id"] == 0
    assert events[0]["recipient"] == "0@x.org" and "bounce_type" in events[0]
    # An empty page's next goes on from where the poller is: a new event is read once.
    later = _record(service.pk, 99).id
    more, _ = _read_all(api, {"after": following}, 1)
    assert [int(e["id"]) for e in more] == [later]


def test_limit_pages_at_most_that_many(api) -> None:
    service = factories.owner()
    for n in range(5):
        _record(service.pk, n)
    _read_all(api, {}, 5)  # settled
    body = api.get(URL, {"limit": 2}).json()
    assert len(body["events"]) == 2
    assert len(api.get(URL, {"limit": 2, "after": body["next"]}).json()["events"]) == 2


def test_since_starts_at_the_events_recorded_from_then(api) -> None:
    service = factories.owner()
    old = [_record(service.pk, n) for n in range(3)]
    two_hours_ago = timezone.now() - timedelta(hours=2)
    ServiceEvent.objects.filter(id__in=[e.id for e in old]).update(recorded_at=two_hours_ago)
    new = [_record(service.pk, n).id for n in range(3, 5)]
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    events, _ = _read_all(api, {"since": since}, 2)
    read = [int(e["id"]) for e in events]
    # Every event since then, none twice; older ones only when a transaction still running
    # (another test database's, here) held the horizon below them: "at least from then".
    assert read[-2:] == new and sorted(read) == read and set(read) <= {e.id for e in old} | set(new)
    # A since with nothing after it: empty, and its next still catches what comes.
    body = api.get(URL, {"since": (timezone.now() + timedelta(hours=1)).isoformat()}).json()
    assert body["events"] == [] and body["next"]
    latest = _record(service.pk, 9).id
    assert [int(e["id"]) for e in _read_all(api, {"after": body["next"]}, 1)[0]] == [latest]


def test_types_narrow_the_read(api) -> None:
    service = factories.owner()
    _record(service.pk, 1, "message.delivered")
    sent = _record(service.pk, 2).id
    bounced = _record(service.pk, 3, "message.bounced").id
    events, _ = _read_all(api, {"types": "message.sent, message.bounced"}, 2)
    assert [int(e["id"]) for e in events] == [sent, bounced]


def test_another_services_events_are_invisible(api) -> None:
    service = factories.owner()
    other, other_key = service_create(name="other")
    mine = _record(service.pk, 1).id
    theirs = _record(other.pk, 2).id
    assert [int(e["id"]) for e in _read_all(api, {}, 1)[0]] == [mine]
    assert [int(e["id"]) for e in _read_all(_client(other_key), {}, 1)[0]] == [theirs]


@pytest.mark.parametrize(("query", "field"), [
    ({"types": "message.sent,message.bogus"}, "types"),
    ({"types": ","}, "types"),
    ({"limit": "0"}, "limit"),
    ({"limit": "1001"}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"after": "bm90LWEtY3Vyc29y"}, "after"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2026-12-01T00:00:00Z", "after": "MTIuMw"}, "since"),
])
def test_bad_input_is_a_400_naming_the_field(api, query, field) -> None:
    response = api.get(URL, query)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()


def test_a_key_without_send_or_analytics_is_refused(db) -> None:
    _, key = service_create(name="campaigns-only", scopes=["campaigns"])
    assert _client(key).get(URL).status_code == 403
