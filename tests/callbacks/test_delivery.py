"""Delivery to a real receiver on 127.0.0.1: signatures, batches, failures and recovery with no
event lost or taken twice, rotation, SSRF at delivery, disable and catch-up (decision 113)."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.deliver import endpoint_deliver
from callbacks.services.endpoints import endpoint_create, secret_rotate
from clients.services import service_create
from testkit.callback_receiver import CallbackReceiver
from tests import factories
from tests.callbacks.conftest import deliver_until, record_events, wait_settled

pytestmark = pytest.mark.django_db(transaction=True)


def _refreshed(endpoint: WebhookEndpoint) -> WebhookEndpoint:
    return WebhookEndpoint.objects.get(pk=endpoint.pk)


def _exactly_once(receiver: CallbackReceiver, expected: list[int]) -> None:
    accepted = receiver.accepted_event_ids()
    assert sorted(set(accepted)) == sorted(expected), "an event was lost"
    assert len(accepted) == len(expected), "an event was taken twice"


def test_a_batch_is_signed_as_standard_webhooks_and_carries_each_events_facts(endpoint, receiver):
    ids = record_events(3)
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 3)
    (request,) = receiver.requests()
    payload = Webhook(endpoint.secret).verify(request.body, request.headers)
    assert [e["id"] for e in payload["events"]] == [str(i) for i in ids]  # as GET /api/v1/events
    first = payload["events"][0]
    assert first["type"] == "message.sent" and first["message_id"] == 1000
    assert (first["idempotency_key"], first["metadata"], first["bounce_type"]) == ("order-0", {"n": 0}, None)
    assert first["occurred_at"].endswith("Z")
    assert request.headers["webhook-id"] == f"msg_{endpoint.pk}_{ids[0]}_{ids[-1]}"
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 32).verify(request.body, request.headers)
    log = EndpointDelivery.objects.get(endpoint=endpoint)
    assert (log.attempt, log.status_code, log.event_ids, log.error) == (1, 200, ids, "")


def test_events_are_batched_by_count_and_by_bytes(endpoint, receiver, settings):
    settings.NOTIFIER_CALLBACKS_BATCH_EVENTS = 100
    ids = record_events(250)
    # All 250 deliverable before the first request (decision 110: another test's open
    # transaction on the same server would let them through in two parts, [100, 100, 12, 38]).
    wait_settled(ids)
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 250)
    assert [len(r.events()) for r in receiver.requests()] == [100, 100, 50]
    _exactly_once(receiver, ids)

    settings.NOTIFIER_CALLBACKS_BATCH_BYTES = 2000
    more = record_events(40, data={"padding": "x" * 100})
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 290)
    bodies = [r.body for r in receiver.requests()[3:]]
    assert len(bodies) > 2 and all(len(body) <= 2000 for body in bodies)
    _exactly_once(receiver, ids + more)


def test_a_receiver_answering_500_then_recovering_gets_every_event_exactly_once(endpoint, receiver):
    receiver.status = 500
    ids = record_events(30)
    deliver_until(endpoint, lambda: _refreshed(endpoint).failed_attempts >= 3)
    failing = _refreshed(endpoint)
    assert failing.failing_since and failing.next_attempt_at > timezone.now() and failing.enabled
    assert receiver.accepted_event_ids() == []
    attempts = list(EndpointDelivery.objects.filter(endpoint=endpoint).order_by("id"))
    assert [(d.attempt, d.status_code) for d in attempts[:3]] == [(1, 500), (2, 500), (3, 500)]

    ids += record_events(20)  # more pile up while it fails
    receiver.status = 200
    deliver_until(endpoint, lambda: len(set(receiver.accepted_event_ids())) >= 50)
    _exactly_once(receiver, ids)
    recovered = _refreshed(endpoint)
    assert (recovered.failing_since, recovered.failed_attempts) == (None, 0)


def test_a_dead_receiver_loses_nothing_and_a_slow_one_times_out(endpoint, receiver, settings):
    receiver.stop()
    ids = record_events(10)
    deliver_until(endpoint, lambda: EndpointDelivery.objects.filter(endpoint=endpoint).exists())
    refused = EndpointDelivery.objects.get(endpoint=endpoint)
    assert refused.status_code is None and "ConnectionRefused" in refused.error
    receiver.start()  # the same port

    settings.NOTIFIER_CALLBACKS_TIMEOUT_SECONDS = 0.5
    receiver.delay_seconds = 1.5
    started = time.monotonic()
    report = endpoint_deliver(endpoint.pk)
    assert report.failed and time.monotonic() - started < 1.4
    timed_out = EndpointDelivery.objects.filter(endpoint=endpoint).latest("id")
    assert timed_out.status_code is None and "timeout" in timed_out.error

    receiver.delay_seconds = 0
    deliver_until(endpoint, lambda: _refreshed(endpoint).failed_attempts == 0)
    time.sleep(1.5)  # the slow answer's handler records its request when its delay is over
    accepted = receiver.accepted_event_ids()
    assert sorted(set(accepted)) == ids  # none lost: at least once
    # The timed-out batch reached the receiver too: the one duplicate the receiver drops by id.
    assert len(accepted) == 2 * len(ids)


def test_during_a_rotations_overlap_both_secrets_sign(endpoint, receiver):
    old_secret = endpoint.secret
    rotated = secret_rotate(endpoint=endpoint)
    record_events(1)
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 1)
    request = receiver.requests()[-1]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Webhook(old_secret).verify(request.body, request.headers)
    Webhook(rotated.secret).verify(request.body, request.headers)

    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        previous_secret_expires_at=timezone.now() - timedelta(seconds=1))
    record_events(1)
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 2)
    request = receiver.requests()[-1]
    assert len(request.headers["webhook-signature"].split(" ")) == 1
    Webhook(rotated.secret).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old_secret).verify(request.body, request.headers)


def test_a_host_that_resolves_to_loopback_is_refused_at_delivery(transactional_db, receiver, settings):
    """Registered while allowed (or while its name resolved elsewhere: DNS rebinding), the name
    is resolved again at each delivery and the POST never leaves."""
    endpoint = endpoint_create(service_id=factories.owner().pk,
                               url=f"https://localhost:{receiver.port}/hooks", event_types=["message.sent"])
    settings.NOTIFIER_CALLBACKS_ALLOW_LOOPBACK = False
    record_events(2)
    deliver_until(endpoint, lambda: EndpointDelivery.objects.filter(endpoint=endpoint).exists())
    refused = EndpointDelivery.objects.get(endpoint=endpoint)
    assert refused.status_code is None and "resolves to" in refused.error and "loopback" in refused.error
    assert receiver.requests() == []


def test_a_redirect_is_a_failure_never_followed(endpoint, receiver):
    receiver.status = 302
    record_events(1)
    deliver_until(endpoint, lambda: EndpointDelivery.objects.filter(endpoint=endpoint).exists())
    log = EndpointDelivery.objects.get(endpoint=endpoint)
    assert log.status_code == 302 and "not followed" in log.error and len(receiver.requests()) == 1


def test_failing_throughout_the_retry_period_disables_then_enabling_catches_up(
        endpoint, receiver, settings, caplog, api_key):
    settings.NOTIFIER_CALLBACKS_RETRY_HOURS = 0.5 / 3600
    receiver.status = 503
    ids = record_events(5)
    deliver_until(endpoint, lambda: not _refreshed(endpoint).enabled, pause=0.2)
    disabled = _refreshed(endpoint)
    assert (disabled.enabled, disabled.disabled_reason) == (False, "failing") and disabled.disabled_at
    assert "CALLBACK ENDPOINT DISABLED" in caplog.text and caplog.records[-1].levelno == logging.ERROR
    assert endpoint_deliver(endpoint.pk).busy  # nothing is posted to a disabled endpoint

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key}")
    shown = api.get(f"/api/v1/webhooks/{endpoint.pk}").json()
    assert (shown["enabled"], shown["disabled_reason"]) == (False, "failing")

    ids += record_events(5)  # recorded while it is off
    receiver.status = 200
    assert api.patch(f"/api/v1/webhooks/{endpoint.pk}", {"enabled": True}, format="json").status_code == 200
    deliver_until(endpoint, lambda: len(set(receiver.accepted_event_ids())) >= 10)
    _exactly_once(receiver, ids)


def test_replay_delivers_again_from_an_event(endpoint, receiver, api_key):
    ids = record_events(6)
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 6)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key}")
    response = api.post(f"/api/v1/webhooks/{endpoint.pk}/replay", {"event_id": ids[3]}, format="json")
    assert response.status_code == 200
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 9)
    assert receiver.accepted_event_ids() == ids + ids[3:]


def test_only_the_endpoints_types_and_service_are_posted(endpoint, receiver):
    other, _ = service_create(name="another")
    others = record_events(3, service_id=other.pk)
    others += record_events(3, type="message.opened")  # not a type it asked for
    wanted = record_events(2, type="message.bounced")
    deliver_until(endpoint, lambda: len(receiver.accepted_event_ids()) >= 2)
    wait_settled(others)
    endpoint_deliver(endpoint.pk)
    assert receiver.accepted_event_ids() == wanted


def test_an_endpoint_with_nothing_of_its_types_moves_past_the_others(endpoint, receiver):
    record_events(5, type="message.opened")
    before = _refreshed(endpoint)
    deliver_until(endpoint, lambda: _refreshed(endpoint).cursor_txid > before.cursor_txid)
    assert receiver.requests() == []


def test_one_delivery_in_flight_per_endpoint(endpoint, receiver):
    receiver.delay_seconds = 1.0
    record_events(1)
    deliver_until(endpoint, lambda: len(receiver.requests()) >= 1, pause=0.2)
    wait_settled(record_events(1))
    reports = []

    def deliver() -> None:
        try:
            reports.append(endpoint_deliver(endpoint.pk))
        finally:
            connection.close()  # this thread's: Django closes only the main thread's

    threads = [threading.Thread(target=deliver) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r.busy for r in reports) == [False, True, True]
    assert len(receiver.requests()) == 2
    assert json.loads(receiver.requests()[-1].body)["events"]
