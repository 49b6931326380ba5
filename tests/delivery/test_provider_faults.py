"""A provider answering everyone with the same permanent error is a provider fault (issue 11).

Real SMTP server (aiosmtpd on 127.0.0.1), real PostgreSQL and Redis, the real sending service.
Every test counts what reached a server: nothing lost (each message SENT once or still QUEUED),
nothing sent twice.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

from analytics.metrics import metrics_cache_clear
from delivery.models import EmailMessage
from delivery.selectors import circuit_breaker_get
from delivery.services.ledger import failed_messages_requeue
from delivery.services.provider_faults import error_signature
from delivery.services.sending import message_batch_send
from notifier.celery import app as celery_app
from testkit import processes
from tests.delivery.conftest import ledger_counts
from tests.factories import email_message, template_version
from tests.feedback.helpers import campaign

Status = EmailMessage.Status
RELAY_DENIED = "550 5.7.1 Relay access denied"
THRESHOLD = 20
# Long enough that a loaded CI machine does not reach its end between two sends of a test that
# expects the breaker still open (at 0.5 s, one run once found it half-open and probing).
COOLDOWN = 2.0


@pytest.fixture(autouse=True)
def smtp_only(settings, smtp_server):
    settings.NOTIFIER_PROVIDERS = ["smtp"]
    settings.SMTP_HOST, settings.SMTP_PORT = "127.0.0.1", smtp_server.port
    settings.SMTP_TIMEOUT_SECONDS = 2.0
    settings.NOTIFIER_PROVIDER_FAULT_SAME_ERRORS = THRESHOLD
    settings.NOTIFIER_BREAKER_COOLDOWN_SECONDS = COOLDOWN
    celery_app.control.purge()
    yield
    celery_app.control.purge()  # put-back publishes send tasks; no worker runs here


def _messages(count: int, *, recipient: str = "") -> list[int]:
    version = template_version()
    overrides = {"recipient": recipient} if recipient else {}
    return [email_message(version=version, priority=2, **overrides).id for _ in range(count)]


def _send(ids: list[int]):
    return message_batch_send(message_ids=ids, token=uuid.uuid4().hex)


def _statuses(ids: list[int]) -> Counter:
    return Counter(EmailMessage.objects.filter(id__in=ids).values_list("status", flat=True))


def _assert_each_sent_once(ids: list[int], smtp_server) -> None:
    received = Counter(smtp_server.handler.ids())
    assert {int(i) for i in received} == set(ids)  # nothing lost
    assert max(received.values()) == 1  # nothing sent twice


def _fault_logs(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.ERROR and "PROVIDER FAULT" in r.getMessage()]


@pytest.mark.django_db
@pytest.mark.parametrize("stage", ["rcpt", "data"])
def test_same_refusal_for_everyone_opens_the_breaker_and_fails_nothing(stage, smtp_server, caplog):
    if stage == "rcpt":
        smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    else:
        smtp_server.handler.refuse_every_data = "554 5.7.1 Service unavailable; sender blocked"
    ids = _messages(50)
    first = _send(ids[:10])  # a streak of 10 < 20: these fail, for now
    assert first.failed == 10 and _statuses(ids[:10]) == {Status.FAILED: 10}
    assert circuit_breaker_get("smtp").state == "closed"

    second = _send(ids[10:20])  # the 20th distinct recipient completes the streak
    assert second.failed == 0 and sorted(second.retry_ids) == ids[10:20]
    breaker = circuit_breaker_get("smtp")
    assert breaker.state == "open" and breaker.fault.startswith(("550 5.7.1", "554 5.7.1"))
    assert "provider fault" in breaker.transitions[0]
    [alert] = _fault_logs(caplog)
    assert "smtp" in alert.getMessage() and "20 different recipients" in alert.getMessage()

    rest = _send(ids[20:])  # breaker open: never offered, no attempt used
    assert sorted(rest.deferred_ids) == ids[20:]
    assert _statuses(ids) == {Status.QUEUED: 50}  # the first ten were put back
    put_back = EmailMessage.objects.filter(id__in=ids[:10])
    assert {m.error for m in put_back} == {"put back: provider fault: smtp answered everyone the same"}
    assert smtp_server.handler.ids() == []

    # The relay is fixed: after the cooldown one probe closes the breaker, the fault ends and
    # every message goes out exactly once.
    smtp_server.handler.refuse_every_rcpt = smtp_server.handler.refuse_every_data = ""
    time.sleep(COOLDOWN + 0.1)
    assert _send(ids).sent == 50
    assert _statuses(ids) == {Status.SENT: 50}
    _assert_each_sent_once(ids, smtp_server)
    breaker = circuit_breaker_get("smtp")
    assert (breaker.state, breaker.fault) == ("closed", "")


@pytest.mark.django_db
def test_the_fault_shows_on_the_overview_the_providers_api_and_metrics(api, client, smtp_server):
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    _send(_messages(THRESHOLD))
    overview = api.get("/api/v1/stats/overview").json()
    assert overview["alerts"]["overall"] == "critical"
    assert overview["alerts"]["per_provider"]["smtp"] == "critical"
    [smtp] = [p for p in overview["providers"] if p["provider"] == "smtp"]
    assert (smtp["breaker"], smtp["fault"]) == ("open", "550 5.7.1 relay access denied")
    [listed] = api.get("/api/v1/providers").json()["providers"]
    assert listed["fault"] == "550 5.7.1 relay access denied"
    metrics_cache_clear()
    try:
        assert 'notifier_provider_fault{provider="smtp"} 1.0' in client.get("/metrics").content.decode()
    finally:
        metrics_cache_clear()  # the next test's scrape must not see this one's


@pytest.mark.django_db
def test_a_different_error_per_bad_address_still_fails_them(smtp_server, caplog):
    ids = _messages(40)
    recipients = dict(EmailMessage.objects.filter(id__in=ids).values_list("id", "recipient"))
    reasons = ["mailbox unavailable", "rejected: policy", "domain has no mail server", "blocked by user",
               "address unknown here", "quota exceeded for account", "spam score too high"]
    smtp_server.handler.rcpt_replies = {
        recipients[i].lower(): f"550 {reasons[n % len(reasons)]}" for n, i in enumerate(ids)
    }
    report = _send(ids)
    assert report.failed == 40 and _statuses(ids) == {Status.FAILED: 40}
    assert circuit_breaker_get("smtp").state == "closed" and circuit_breaker_get("smtp").fault == ""
    assert _fault_logs(caplog) == []


@pytest.mark.django_db
def test_no_such_user_for_a_whole_stale_list_still_fails_them(smtp_server, caplog):
    ids = _messages(40)
    recipients = EmailMessage.objects.filter(id__in=ids).values_list("recipient", flat=True)
    # One text for all (but the address): RFC 3463 X.1.1 is a verdict on that mailbox, never a fault.
    smtp_server.handler.rcpt_replies = {
        r.lower(): f"550 5.1.1 <{r}>: Recipient address rejected: User unknown" for r in recipients
    }
    assert _send(ids).failed == 40
    assert circuit_breaker_get("smtp").fault == "" and _fault_logs(caplog) == []


@pytest.mark.django_db
def test_a_success_or_another_error_resets_the_streak(smtp_server):
    ids = _messages(60)
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    _send(ids[:15])
    smtp_server.handler.refuse_every_rcpt = ""
    assert _send(ids[15:16]).sent == 1  # one acceptance: the provider works
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    _send(ids[16:31])
    smtp_server.handler.refuse_every_rcpt = "550 5.7.0 Message rejected"  # a different error
    _send(ids[31:32])
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    _send(ids[32:50])
    assert circuit_breaker_get("smtp").fault == ""
    assert _statuses(ids[:50]) == {Status.FAILED: 49, Status.SENT: 1}


@pytest.mark.django_db
def test_one_recipient_refused_many_times_is_not_a_fault(smtp_server):
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    ids = _messages(30, recipient="same@example.com")
    assert _send(ids).failed == 30
    assert circuit_breaker_get("smtp").fault == ""


@pytest.mark.django_db
def test_a_provider_fault_fails_over_to_the_next_provider(settings, esps, smtp_server):
    settings.NOTIFIER_PROVIDERS = ["smtp", "sendgrid"]
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    ids = _messages(100)
    reports = [_send(ids[start:start + 25]) for start in range(0, 100, 25)]
    assert [r.failed for r in reports] == [0, 0, 0, 0]  # the streak completes inside the first batch
    assert _statuses(ids) == {Status.SENT: 100}
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("provider", flat=True)) == {"sendgrid"}
    assert circuit_breaker_get("smtp").state == "open"
    lost, duplicates, cross = ledger_counts({"sendgrid": esps["sendgrid"]}, ids)
    assert (lost, duplicates, cross, smtp_server.handler.ids()) == ([], {}, {}, [])


@pytest.mark.django_db(transaction=True)
def test_the_streak_is_shared_by_worker_processes(smtp_server, tmp_path):
    """Another process fails 15 messages; this one completes the streak and puts them back."""
    smtp_server.handler.refuse_every_rcpt = RELAY_DENIED
    ids = _messages(30)
    code = ("import django; django.setup(); import sys, uuid\n"
            "from delivery.services.sending import message_batch_send\n"
            f"r = message_batch_send(message_ids={ids[:15]}, token=uuid.uuid4().hex)\n"
            "sys.exit(0 if r.failed == 15 else 1)\n")
    env = processes.subprocess_env(
        SMTP_HOST="127.0.0.1", SMTP_PORT=str(smtp_server.port), NOTIFIER_PROVIDERS="smtp",
        NOTIFIER_PROVIDER_FAULT_SAME_ERRORS=str(THRESHOLD), DJANGO_SETTINGS_MODULE="notifier.settings",
    )
    subprocess.run([sys.executable, "-c", code], env=env, cwd=processes.BASE_DIR, check=True, timeout=60)
    assert _statuses(ids[:15]) == {Status.FAILED: 15}
    assert _send(ids[15:]).failed == 0
    assert circuit_breaker_get("smtp").state == "open"
    assert _statuses(ids) == {Status.QUEUED: 30}


@pytest.mark.django_db
def test_put_back_leaves_accepted_rows_and_finished_campaigns_alone():
    open_campaign, cancelled = campaign(status="SENDING"), campaign(status="CANCELLED")
    rows = {
        "plain": email_message(status=Status.FAILED),
        "open campaign": email_message(status=Status.FAILED, campaign=open_campaign),
        "cancelled campaign": email_message(status=Status.FAILED, campaign=cancelled),
        "has a provider id": email_message(status=Status.FAILED, provider_message_id="esp-1"),
        "not failed": email_message(status=Status.SENT),
    }
    moved = failed_messages_requeue(message_ids=[m.id for m in rows.values()], error="put back")
    assert {m_id for m_id, _ in moved} == {rows["plain"].id, rows["open campaign"].id}


@pytest.mark.parametrize(("recorded", "recipient", "expected"), [
    ("550 5.7.1 <bob@x.org>: Relay access denied", "bob@x.org", "550 5.7.1 <{rcpt}>: relay access denied"),
    ("550 5.7.1 <al@y.org>: Relay access denied", "al@y.org", "550 5.7.1 <{rcpt}>: relay access denied"),
    ("554 Service unavailable; client [10.0.0.7] blocked, id=AB12", "a@b.c",
     "554 service unavailable; client # blocked, #"),
    ("554 sender x@corp.example rejected", "a@b.c", "554 sender {addr} rejected"),
    ("550 5.1.1 <a@b.c>: User unknown", "a@b.c", None),
    ("552 5.2.2 Mailbox full", "a@b.c", None),
    ("Email address is not verified.", "a@b.c", "email address is not verified."),
])
def test_error_signature(recorded, recipient, expected):
    assert error_signature(recorded, recipient) == expected
