"""A real receiver on 127.0.0.1 and helpers to record events and deliver until they arrive."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from django.utils import timezone

from callbacks.models import WebhookEndpoint
from callbacks.services.deliver import DeliveryReport, endpoint_deliver
from callbacks.services.endpoints import endpoint_create
from eventlog.models import ServiceEvent
from eventlog.selectors import HORIZON_SQL
from testkit.callback_receiver import CallbackReceiver
from tests import factories


@pytest.fixture
def receiver() -> Iterator[CallbackReceiver]:
    with CallbackReceiver() as started:
        yield started


@pytest.fixture
def endpoint(transactional_db, receiver: CallbackReceiver) -> WebhookEndpoint:
    return endpoint_create(service_id=factories.owner().pk, url=receiver.url,
                           event_types=["message.sent", "message.delivered", "message.bounced"])


def record_events(count: int, *, service_id: str | None = None, type: str = "message.sent",
                  data: dict | None = None) -> list[int]:
    """`count` events of one service, each committed on its own (autocommit)."""
    service_id = service_id or factories.owner().pk
    return [ServiceEvent.objects.create(
        service_id=service_id, type=type, message_id=1000 + n, occurred_at=timezone.now(),
        data=data if data is not None else {"idempotency_key": f"order-{n}", "metadata": {"n": n}}).pk
        for n in range(count)]


def wait_settled(event_ids: list[int], timeout: float = 60.0) -> None:
    """Wait until every one of `event_ids` is below the cluster's oldest running transaction, so
    that a delivery can read it: another xdist worker's test database may hold an older open
    transaction for a moment (decision 110)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        settled = ServiceEvent.objects.filter(pk__in=event_ids).extra(
            where=[f"txid < {HORIZON_SQL}"]).count()
        if settled == len(event_ids):
            return
        time.sleep(0.05)
    raise AssertionError(f"events {event_ids} not settled within {timeout} s")


def deliver_until(endpoint: WebhookEndpoint, done: Callable[[], bool], timeout: float = 60.0,
                  pause: float = 0.05) -> list[DeliveryReport]:
    """Run deliveries until `done()`: events are deliverable only once every older transaction
    of the cluster ended (decision 110), which another test database's may hold a moment."""
    reports = []
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        reports.append(endpoint_deliver(endpoint.pk))
        time.sleep(pause)
    return reports
