"""The ledger writes a service's events in the statements that change its messages (decision
115): through the real API, broker, critical and normal Celery pools and a recording SMTP
server, every accepted message records message.accepted and message.sent once each (lost and
duplicate events counted), a suppressed recipient message.suppressed, and a service that records
no types writes no row at all."""

from __future__ import annotations

from collections import Counter

import pytest
import requests

from audience.models import Suppression
from clients.services import service_create
from delivery.models import EmailMessage
from eventlog.models import RecordedEventTypes, ServiceEvent
from eventlog.types import ALL_EVENT_TYPES, EventType
from templates.services import template_create
from testkit import processes
from testkit.waiting import wait_for
from tests import factories

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status


def _post(live_server, key: str, path: str, body: dict) -> requests.Response:
    return requests.post(f"{live_server.url}/api/v1/{path}", json=body,
                         headers={"Authorization": f"Api-Key {key}"}, timeout=30)


def _otp(to: str, priority: str = "critical", **extra) -> dict:
    return {"to": to, "template": "otp", "priority": priority, "context": {"name": "Ada", "code": "1"},
            **extra}


def _send_mix(live_server, key: str, tag: str) -> tuple[set[int], int]:
    """Single sends (critical, one keyed), a batch of critical and normal items, one suppressed
    recipient: (the ids that must be SENT, the suppressed one's id)."""
    ids = {_post(live_server, key, "messages", _otp(f"{tag}-{i}@example.com", **(
        {"idempotency_key": f"{tag}-k", "metadata": {"order": f"{tag}-O1"}} if i == 0 else {}))
    ).json()["id"] for i in range(5)}
    batch = _post(live_server, key, "messages/batch", {"messages": [
        _otp(f"{tag}-b{i}@example.com", "critical" if i % 2 else "normal",
             **({"metadata": {"order": f"{tag}-B{i}", "n": i}} if i < 2 else {})) for i in range(40)]})
    assert batch.status_code == 202, batch.text[:300]
    ids |= {result["id"] for result in batch.json()["results"]}
    suppressed = _post(live_server, key, "messages", _otp(f"{tag}-gone@example.com"))
    assert suppressed.json()["status"] == "SUPPRESSED"
    return ids, suppressed.json()["id"]


def test_each_message_records_accepted_and_sent_once_and_a_silent_service_nothing(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    owner = factories.owner()
    RecordedEventTypes.objects.create(service=owner, types=list(ALL_EVENT_TYPES))
    silent, silent_key = service_create(name="silent")
    template_create(client=silent, name="otp", subject="Code {{ code }}", html_body="<p>{{ name }}</p>")
    for tag in ("a", "s"):
        Suppression.objects.create(email=f"{tag}-gone@example.com", reason=Suppression.Reason.MANUAL)
    for role in ("critical", "normal"):
        spawn(processes.celery_worker(role, process_env, tmp_path, concurrency=2)).wait_for_log("ready.")

    ids, suppressed_id = _send_mix(live_server, api_key, "a")
    silent_ids, _ = _send_mix(live_server, silent_key, "s")
    everything = ids | silent_ids
    assert wait_for(lambda: EmailMessage.objects.filter(id__in=everything, status=Status.SENT).count()
                    == len(everything), timeout=60)

    events = list(ServiceEvent.objects.filter(service=owner).values_list("message_id", "type"))
    counted = Counter(events)
    for event_type in (EventType.ACCEPTED, EventType.SENT):
        lost = sorted(m for m in ids if counted[(m, event_type)] == 0)
        duplicates = sorted(m for m in ids if counted[(m, event_type)] > 1)
        assert (event_type, lost, duplicates) == (event_type, [], [])
    assert counted[(suppressed_id, EventType.SUPPRESSED)] == 1
    assert len(events) == 2 * len(ids) + 1  # nothing else: no event of another kind or message
    assert not ServiceEvent.objects.filter(service=silent).exists()
    keyed = ServiceEvent.objects.get(service=owner, type=EventType.SENT, data__idempotency_key="a-k")
    assert keyed.data["recipient"] == "a-0@example.com"
    assert keyed.data["provider"] == "smtp" and keyed.data["stream"] == "transactional"
    assert keyed.data["test"] is False and keyed.data["bounce_type"] is None
    # The service's own references ride on every event of the message (decision 114).
    for event_type in (EventType.ACCEPTED, EventType.SENT):
        for recipient, metadata in (("a-0@example.com", {"order": "a-O1"}),
                                    ("a-b0@example.com", {"order": "a-B0", "n": 0}),
                                    ("a-b1@example.com", {"order": "a-B1", "n": 1}),
                                    ("a-1@example.com", None)):
            event = ServiceEvent.objects.get(service=owner, type=event_type, data__recipient=recipient)
            assert event.data["metadata"] == metadata, (event_type, recipient, event.data)
    received = Counter(smtp_server.handler.ids())
    assert sorted(m for m in everything if received[str(m)] != 1) == []
