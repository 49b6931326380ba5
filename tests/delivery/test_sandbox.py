"""The test-key sandbox (issue 27): a test key's messages go through the whole send path and
their statuses, and get the events an ESP would send, but reach no ESP or SMTP server, take no
rate token, never look at a breaker, suppress only in their own scope and stay out of the live
figures.

In-process tests drive the real send task against the fake ESPs (real PostgreSQL and Redis);
the last test runs real critical and ops pools and an SMTP server, with a live message in the
same run, and counts what each server received (lost 0, duplicates 0).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from analytics.dashboard.selectors import recent_failures
from analytics.selectors.overview import webhook_summary
from analytics.selectors.queues import provider_health, throughput_last_hour
from audience.models import Suppression
from clients.key_types import KeyType
from delivery.models import DeadLetter, DeliveryAttempt, EmailMessage
from delivery.selectors import messages_visible
from delivery.services.circuit_breaker import breaker_open
from delivery.services.sandbox import SANDBOX_PROVIDER, SIMULATOR_DOMAIN, sandbox_event_steps
from delivery.services.sending import attempt_limit
from delivery.tasks import send_batch
from feedback.models import EmailEvent
from feedback.services.sandbox import sandbox_events_apply
from testkit import processes
from testkit.waiting import wait_for
from tests.delivery.conftest import ledger_counts
from tests.factories import email_message, owner, template_version
from transactional.services import message_create

Status = EmailMessage.Status
TEST = KeyType.TEST


def magic(scenario: str, label: str = "") -> str:
    return f"{scenario}+{label or uuid.uuid4().hex[:8]}@{SIMULATOR_DOMAIN}"


def _task(message_ids: list[int], priority: int = 0) -> str:
    """The real Celery task, run in this process."""
    return send_batch.apply(args=(message_ids, priority), task_id=uuid.uuid4().hex).get()


def _settle_events(message: EmailMessage) -> None:
    """What the feedback tasks do, step by step, in this process."""
    for step in range(1, sandbox_event_steps(message.recipient) + 1):
        sandbox_events_apply(items=[[message.id, message.recipient]], step=step)


def _events(message: EmailMessage) -> list[tuple[str, str]]:
    rows = EmailEvent.objects.filter(message=message).order_by("id")
    return [(event.event_type, event.bounce_type) for event in rows]


@pytest.mark.django_db
class TestInProcess:
    @pytest.mark.parametrize("priority", [0, 2, 3])  # send_one, a P2 batch, a P3 batch (hand-off at claim)
    def test_test_messages_reach_no_esp_and_take_no_token_or_breaker(self, settings, esps, empty_broker,
                                                                     priority):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        # One token for the whole test, and an open breaker: a test message that took a token
        # or asked the breaker would be deferred, and the live message after them too.
        settings.NOTIFIER_PROVIDER_RATE_LIMITS = "sendgrid=0.001:1"
        settings.NOTIFIER_RATE_LIMIT_P0_RESERVE = 0  # the one token is any priority's
        version = template_version()
        tests = [email_message(version=version, priority=priority, key_type=TEST) for _ in range(3)]
        report = _task([m.id for m in tests], priority)
        assert "sent=3" in report, report
        for message in EmailMessage.objects.filter(id__in=[m.id for m in tests]):
            assert (message.status, message.provider) == (Status.SENT, SANDBOX_PROVIDER)
            assert message.provider_message_id == f"sandbox-{message.id}" and message.sent_at
        assert DeliveryAttempt.objects.filter(message__in=tests, provider=SANDBOX_PROVIDER).count() == 3
        assert esps["sendgrid"].ledger.count() == 0
        live = email_message(version=version, priority=priority)
        assert "sent=1" in _task([live.id], priority)  # the one token was still there
        assert ledger_counts({"sendgrid": esps["sendgrid"]}, [live.id]) == ([], {}, {})
        breaker_open(provider="sendgrid", reason="test")
        late = email_message(version=version, priority=priority, key_type=TEST)
        assert "sent=1" in _task([late.id], priority)  # an open breaker is not the sandbox's
        assert esps["sendgrid"].ledger.count() == 1

    @pytest.mark.parametrize(("scenario", "status", "events"), [
        ("delivered", Status.DELIVERED, [("delivered", "")]),
        ("bounce", Status.BOUNCED, [("bounced", "hard")]),
        ("soft-bounce", Status.DELIVERED, [("bounced", "soft"), ("delivered", "")]),
        ("complaint", Status.COMPLAINED, [("delivered", ""), ("complained", "")]),
    ])
    def test_a_magic_address_yields_its_statuses_and_events(self, settings, esps, empty_broker,
                                                            scenario, status, events):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        message = email_message(recipient=magic(scenario), key_type=TEST)
        assert "sent=1" in _task([message.id])
        _settle_events(message)
        message.refresh_from_db()
        assert message.status == status
        assert _events(message) == events
        suppressed = scenario in ("bounce", "complaint")
        assert Suppression.objects.filter(email=message.recipient, sandbox=True).exists() is suppressed
        assert not Suppression.objects.filter(email=message.recipient, sandbox=False).exists()
        assert esps["sendgrid"].ledger.count() == 0

    def test_temporary_failures_are_retried_then_dead_lettered(self, settings, esps, empty_broker):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        message = email_message(recipient=magic("temp-fail"), key_type=TEST)
        for attempt in range(attempt_limit(0)):
            report = _task([message.id])
            message.refresh_from_db()
            if attempt < attempt_limit(0) - 1:
                assert "retry=1" in report and message.status == Status.QUEUED, report
        assert message.status == Status.FAILED
        assert DeadLetter.objects.filter(message=message).count() == 1
        outcomes = DeliveryAttempt.objects.filter(message=message).values_list("outcome", flat=True)
        assert list(outcomes) == ["transient"] * attempt_limit(0)
        assert esps["sendgrid"].ledger.count() == 0

    def test_a_test_suppression_stops_test_sends_only(self, settings, esps, empty_broker):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        address = magic("bounce")
        bounced = email_message(recipient=address, key_type=TEST)
        _task([bounced.id])
        _settle_events(bounced)
        live = email_message(recipient=address)
        again = email_message(recipient=address, key_type=TEST)
        _task([live.id])
        _task([again.id])
        assert EmailMessage.objects.get(id=live.id).status == Status.SENT
        assert EmailMessage.objects.get(id=again.id).status == Status.SUPPRESSED
        assert ledger_counts({"sendgrid": esps["sendgrid"]}, [live.id]) == ([], {}, {})
        assert esps["sendgrid"].ledger.count() == 1
        # and the other way round: a live suppression never stops a test send
        Suppression.objects.create(email="gone@example.com")
        test = email_message(recipient="gone@example.com", key_type=TEST)
        _task([test.id])
        assert EmailMessage.objects.get(id=test.id).status == Status.SENT

    def test_the_create_service_records_the_key_type_and_checks_its_scope(self):
        Suppression.objects.create(email="scoped@example.com", sandbox=True)
        version = template_version()
        common = {"client": owner(), "recipient": "scoped@example.com", "template_version": version,
                  "context": {"name": "Ada"}, "priority": 0}
        test = message_create(**common, key_type=TEST, idempotency_key="t").message
        live = message_create(**common, idempotency_key="l").message
        assert (test.key_type, test.status) == (TEST, Status.SUPPRESSED)
        assert (live.key_type, live.status) == (KeyType.LIVE, Status.QUEUED)

    def test_live_figures_and_reads_leave_test_messages_out(self, settings, esps, empty_broker):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        tests = [email_message(recipient=magic(s), key_type=TEST) for s in ("complaint", "temp-fail")]
        live = email_message()
        _task([tests[0].id])
        _settle_events(tests[0])
        _task([live.id])
        EmailMessage.objects.filter(id=tests[1].id).update(status=Status.FAILED)
        assert throughput_last_hour()["per_priority"]["critical"] == 1
        assert webhook_summary()["events_last_hour"] == {}
        assert [row["provider"] for row in provider_health()] == ["sendgrid"]
        assert tests[1].id not in {row["id"] for row in recent_failures()}
        everyone = EmailMessage.objects.all()
        shown = messages_visible(everyone, key_type=KeyType.LIVE)
        assert set(shown.values_list("id", flat=True)) == {live.id}
        asked = messages_visible(everyone, key_type=KeyType.LIVE, asked=TEST)
        assert set(asked.values_list("id", flat=True)) == {m.id for m in tests}
        own = messages_visible(everyone, key_type=TEST, asked=KeyType.LIVE)  # a test key sees no live row
        assert set(own.values_list("id", flat=True)) == {m.id for m in tests}

    def test_the_message_api_shows_a_live_key_test_messages_only_when_asked(self, api):
        test = email_message(client=owner(), key_type=TEST)
        live = email_message(client=owner())
        assert api.get(f"/api/v1/messages/{test.id}").status_code == 404
        assert api.get(f"/api/v1/messages/{test.id}?key_type=test").json()["id"] == test.id
        assert api.get(f"/api/v1/messages/{live.id}").json()["id"] == live.id
        assert api.get(f"/api/v1/messages/{live.id}?key_type=test").status_code == 404
        bad = api.get(f"/api/v1/messages/{live.id}?key_type=sandbox")
        assert bad.status_code == 400 and "key_type" in bad.json()["error"]["fields"]


@pytest.mark.e2e
def test_real_pools_settle_every_magic_address_and_send_only_the_live_message(
    smtp_server, process_env, spawn, tmp_path
):
    env = {**process_env, "NOTIFIER_SANDBOX_EVENT_DELAY_SECONDS": "0.3",
           "NOTIFIER_RETRY_BASE_SECONDS": "0.05", "NOTIFIER_RETRY_CAP_SECONDS": "0.3"}
    spawn(processes.celery_worker("critical", env, tmp_path)).wait_for_log("ready.", timeout=60)
    ops = spawn(processes.ops_worker(env, tmp_path, concurrency=1))
    ops.wait_for_log("ready.", timeout=60)
    version = template_version()
    run = uuid.uuid4().hex[:8]
    common = {"client": owner(), "template_version": version, "context": {"name": "Ada"}, "priority": 0}
    expected = {
        magic("delivered", run): (Status.DELIVERED, ["delivered"]),
        magic("bounce", run): (Status.BOUNCED, ["bounced"]),
        magic("soft-bounce", run): (Status.DELIVERED, ["bounced", "delivered"]),
        magic("complaint", run): (Status.COMPLAINED, ["delivered", "complained"]),
        magic("temp-fail", run): (Status.FAILED, []),
        f"anyone-{run}@example.com": (Status.DELIVERED, ["delivered"]),
    }
    tests = {address: message_create(**common, recipient=address, key_type=TEST).message.id
             for address in expected}
    live = [message_create(**common, recipient=f"live{i}-{run}@example.com").message.id for i in range(3)]

    def settled() -> bool:
        rows = dict(EmailMessage.objects.filter(id__in=tests.values()).values_list("id", "status"))
        events = Counter(EmailEvent.objects.filter(message_id__in=tests.values()).values_list("message_id"))
        return all(rows[tests[a]] == status and events[(tests[a],)] == len(types)
                   for a, (status, types) in expected.items())

    assert wait_for(settled, timeout=60), ops.log()[-3000:]
    assert wait_for(lambda: len(smtp_server.handler.ids()) >= len(live), timeout=30)
    bounce = magic("bounce", run)
    after_bounce = message_create(**common, recipient=bounce, idempotency_key=f"live-{run}").message.id
    again = message_create(**common, recipient=bounce, key_type=TEST, idempotency_key=f"test-{run}").message
    assert again.status == Status.SUPPRESSED  # the test key's own suppression
    assert wait_for(lambda: EmailMessage.objects.get(id=after_bounce).status == Status.SENT, timeout=30)
    time.sleep(1.0)  # anything late would arrive now

    received = Counter(smtp_server.handler.ids())
    assert not received.keys() & {str(pk) for pk in tests.values()}, "a test message reached SMTP"
    sent_live = [*live, after_bounce]
    lost = [pk for pk in sent_live if received[str(pk)] == 0]
    duplicates = {pk: n for pk, n in received.items() if n > 1}
    assert (lost, duplicates, sum(received.values())) == ([], {}, len(sent_live))
    for address, (_, types) in expected.items():
        rows = EmailEvent.objects.filter(message_id=tests[address]).order_by("occurred_at", "id")
        assert [e.event_type for e in rows] == types, address
        assert {e.provider for e in rows} <= {SANDBOX_PROVIDER}
    failed = EmailMessage.objects.get(id=tests[magic("temp-fail", run)])
    assert failed.attempts == attempt_limit(0) and DeadLetter.objects.filter(message=failed).exists()
    assert set(Suppression.objects.filter(email__in=list(expected)).values_list("email", "sandbox")) == {
        (bounce, True), (magic("complaint", run), True)}
    assert throughput_last_hour()["per_priority"]["critical"] == len(sent_live)
