"""Fault tests with real Celery worker processes sending to the fake ESPs (F10-F13, limits).

Each test counts lost messages, duplicates and cross-ESP duplicates from the fakes' ledgers, by
our message id, and checks the ledger in Postgres agrees. Windows are shortened from the issue's
(a 6 s 429 storm instead of 60 s) so the suite stays within minutes on a shared 2-core machine.
"""

from __future__ import annotations

import time
from statistics import median

import pytest

from delivery.models import DeadLetter, EmailMessage
from delivery.services.dispatch import messages_enqueue
from delivery.services.reconcile import message_reconcile
from notifier.celery import app as celery_app
from testkit import processes
from testkit.fakes import FakeSendGrid
from testkit.fakes.http_base import HttpReply, Result
from testkit.fakes.ledger import Outcome
from testkit.waiting import wait_for
from tests.delivery.conftest import esp_env, ledger_counts
from tests.support.send_runs import messages_create, send_workers, settled, statuses

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
Status = EmailMessage.Status
FAST_RETRIES = {"NOTIFIER_RETRY_BASE_SECONDS": "0.2", "NOTIFIER_RETRY_CAP_SECONDS": "2",
                "NOTIFIER_DEFER_SECONDS": "0.3", "NOTIFIER_ESP_READ_TIMEOUT_SECONDS": "1",
                "NOTIFIER_ESP_CONNECT_TIMEOUT_SECONDS": "1"}


@pytest.fixture(autouse=True)
def _purge():
    celery_app.control.purge()
    yield
    celery_app.control.purge()


def _env(esps, providers: str, **extra: str) -> dict[str, str]:
    return processes.subprocess_env(NOTIFIER_PROVIDERS=providers, **esp_env(esps), **FAST_RETRIES, **extra)


def test_primary_5xx_everything_delivered_by_secondary_exactly_once(esps, spawn, tmp_path):
    esps["sendgrid"].faults.error_5xx(503)
    ids = messages_create(300, priority=2)
    send_workers(spawn, tmp_path, _env(esps, "sendgrid,mailgun"), "normal")
    messages_enqueue(message_ids=ids, priority=2)
    assert wait_for(lambda: settled(ids), timeout=60, interval=0.2), statuses(ids)
    assert ledger_counts(esps, ids) == ([], {}, {})
    assert statuses(ids) == {Status.SENT: 300}
    assert esps["mailgun"].ledger.count() == 300


def test_primary_refusing_connections_fails_over(esps, spawn, tmp_path):
    esps["ses"].faults.refuse()
    ids = messages_create(40, priority=0)
    send_workers(spawn, tmp_path, _env(esps, "ses,sendgrid"), "critical", concurrency=4)
    messages_enqueue(message_ids=ids, priority=0)
    assert wait_for(lambda: settled(ids), timeout=60, interval=0.2), statuses(ids)
    assert ledger_counts(esps, ids) == ([], {}, {})
    assert esps["sendgrid"].ledger.count() == 40


def test_accept_then_hang_is_held_ambiguous_and_reconciled_never_cross_sent(esps, spawn, tmp_path):
    esps["sendgrid"].faults.accept_then_hang(hang_seconds=3, probability=0.05)
    ids = messages_create(120, priority=0)
    send_workers(spawn, tmp_path, _env(esps, "sendgrid,mailgun"), "critical", concurrency=4)
    messages_enqueue(message_ids=ids, priority=0)
    assert wait_for(lambda: settled(ids), timeout=120, interval=0.2), statuses(ids)
    held = EmailMessage.objects.filter(id__in=ids, status=Status.AMBIGUOUS)
    ambiguous = list(held.values_list("id", flat=True))
    assert ambiguous, "the fault plan hung some requests"
    lost, dups, cross = ledger_counts(esps, ids)
    assert (lost, dups, cross) == ([], {}, {})
    # The webhook processing proves acceptance from the ESP's events: the fake's ledger here.
    hung = {e.message_id: e for e in esps["sendgrid"].ledger.entries()}
    for message_id in ambiguous:
        entry = hung[str(message_id)]
        assert message_reconcile(message_id=message_id, accepted=True, provider="sendgrid",
                                 provider_message_id=entry.provider_message_id)
    assert statuses(ids) == {Status.SENT: 120}


def test_429_storm_nothing_dead_lettered_retry_after_respected(esps, spawn, tmp_path):
    storm, retry_after = 6.0, 2
    ids_p0 = messages_create(20, priority=0, prefix="otp")
    ids_p3 = messages_create(600, priority=3, prefix="bulk")
    env = _env(esps, "sendgrid")
    send_workers(spawn, tmp_path, env, "critical", concurrency=2)
    send_workers(spawn, tmp_path, env, "low", concurrency=2)
    esps["sendgrid"].faults.rate_limit(retry_after, for_seconds=storm)
    messages_enqueue(message_ids=ids_p3, priority=3)
    messages_enqueue(message_ids=ids_p0, priority=0)
    assert wait_for(lambda: settled(ids_p0 + ids_p3), timeout=90, interval=0.2), statuses(ids_p0 + ids_p3)
    assert DeadLetter.objects.count() == 0
    assert ledger_counts(esps, ids_p0 + ids_p3) == ([], {}, {})
    throttled = esps["sendgrid"].ledger.outcomes().get(Outcome.RATE_LIMITED, 0)
    # Respecting Retry-After: about one probe per window, plus what was in flight at the start.
    assert 1 <= throttled <= storm / retry_after + 1 + 4
    # P0 recovers first: lower priorities come back later after a throttle (tasks.defer_delay).
    accepted = {e.message_id: e.accepted_at for e in esps["sendgrid"].ledger.entries()}
    assert median(accepted[str(i)] for i in ids_p0) <= median(accepted[str(i)] for i in ids_p3)


class PoisonSendGrid(FakeSendGrid):
    """Answers 500 to any request for poison@...: a message no retry will ever get through."""

    poisoned = True

    def _send(self, request):
        body = request.json()
        recipients = [to["email"] for p in body.get("personalizations", []) for to in p["to"]]
        if self.poisoned and any(r.startswith("poison@") for r in recipients):
            return Result(HttpReply.json(500, {"errors": [{"message": "boom"}]}), [], Outcome.SERVER_ERROR)
        return super()._send(request)


def test_poison_message_dead_lettered_others_unaffected_requeue_sends_once(esps, spawn, tmp_path):
    with PoisonSendGrid() as poison_esp:
        esps = {**esps, "sendgrid": poison_esp}
        env = _env(esps, "sendgrid", NOTIFIER_BREAKER_FAILURES="100")
        ids = messages_create(30, priority=0)
        [poison_id] = messages_create(1, priority=0, domain="x.example", prefix="poison")
        EmailMessage.objects.filter(id=poison_id).update(recipient="poison@x.example")
        send_workers(spawn, tmp_path, env, "critical", concurrency=2)
        messages_enqueue(message_ids=[poison_id, *ids], priority=0)
        everything = [poison_id, *ids]
        assert wait_for(lambda: settled(everything), timeout=90, interval=0.2), statuses(everything)
        assert statuses(ids) == {Status.SENT: 30}
        dead = DeadLetter.objects.get(message_id=poison_id)
        assert len(dead.attempts) == 5  # P0's max_send_attempts
        assert ledger_counts(esps, ids) == ([], {}, {})
        poison_esp.poisoned = False
        from django.core.management import call_command
        call_command("requeue_dead_letters")
        call_command("requeue_dead_letters")
        assert wait_for(lambda: statuses([poison_id]) == {Status.SENT: 1}, timeout=30, interval=0.2)
        time.sleep(1)
        assert ledger_counts(esps, [poison_id, *ids]) == ([], {}, {})


def _steady_rate(times: list[float], trim: float = 1.5) -> tuple[float, float]:
    """Acceptances per second in the steady middle of a run.

    Tokens are taken before a request and acceptance is stamped after it, and a worker may hold
    a batch up to the inline wait while collecting tokens, so the first and last moments of a
    run are skewed; `trim` seconds are cut from both ends.
    """
    start, end = times[0] + trim, times[-1] - trim
    inside = [t for t in times if start <= t <= end]
    return len(inside) / (end - start), end - start


def test_two_workers_share_one_50_per_second_provider_limit(esps, spawn, tmp_path):
    ids = messages_create(750, priority=2)
    env = _env(esps, "sendgrid", NOTIFIER_PROVIDER_RATE_LIMITS="sendgrid=50:5")
    send_workers(spawn, tmp_path, env, "normal", count=2, concurrency=2)
    messages_enqueue(message_ids=ids, priority=2)
    assert wait_for(lambda: settled(ids), timeout=60, interval=0.2), statuses(ids)
    assert ledger_counts(esps, ids) == ([], {}, {})
    times = sorted(e.accepted_at for e in esps["sendgrid"].ledger.entries())
    rate, span = _steady_rate(times)
    print(f"provider limit 50/s: measured {rate:.1f}/s over {span:.1f} s")
    # Above the limit is the failure this test is for (a per-process bucket gives ~100/s). Below
    # it, the rate is the machine's: a CI run under another test's disk load measured 25.4/s.
    # That the shared bucket lets its full rate through is test_rate_limits' two-caller test.
    assert rate <= 55, rate


def test_per_domain_limit_holds_across_workers(esps, spawn, tmp_path):
    slow = messages_create(300, priority=2, domain="gmail.com")
    fast = messages_create(200, priority=2, domain="example.com", prefix="f")
    env = _env(esps, "sendgrid", NOTIFIER_DOMAIN_RATE_LIMITS="gmail.com=20")
    send_workers(spawn, tmp_path, env, "normal", count=2, concurrency=2)
    messages_enqueue(message_ids=slow + fast, priority=2)
    assert wait_for(lambda: settled(slow + fast), timeout=60, interval=0.2), statuses(slow + fast)
    assert ledger_counts(esps, slow + fast) == ([], {}, {})
    gmail = sorted(e.accepted_at for e in esps["sendgrid"].ledger.entries() if "gmail" in e.recipient)
    rate, span = _steady_rate(gmail)
    print(f"domain limit 20/s: measured {rate:.1f}/s over {span:.1f} s")
    # Above the limit is the failure this test is for (a per-process bucket gives ~40/s); below
    # it, as in the provider test above, the rate is the machine's (17.9/s seen under xdist).
    assert rate <= 22, rate


def test_breaker_opens_skips_probes_and_closes_as_the_ledger_shows(esps, spawn, tmp_path):
    env = _env(esps, "sendgrid,mailgun", NOTIFIER_BREAKER_FAILURES="3",
               NOTIFIER_BREAKER_COOLDOWN_SECONDS="1", NOTIFIER_BREAKER_PROBE_SECONDS="3")
    send_workers(spawn, tmp_path, env, "critical", concurrency=2)
    outage = 4.0
    esps["sendgrid"].faults.error_5xx(503, for_seconds=outage)
    started = time.monotonic()
    ids: list[int] = []
    for second in range(8):  # 15 messages a second for 8 s
        batch = messages_create(15, priority=0, prefix=f"s{second}")
        messages_enqueue(message_ids=batch, priority=0)
        ids += batch
        time.sleep(max(0.0, started + second + 1 - time.monotonic()))
    assert wait_for(lambda: settled(ids), timeout=60, interval=0.2), statuses(ids)
    assert ledger_counts(esps, ids) == ([], {}, {})
    failures = esps["sendgrid"].ledger.outcomes().get(Outcome.SERVER_ERROR, 0)
    sent_in_outage = 15 * outage
    # Opened after 3 failures (plus what was in flight), then about one probe per cooldown.
    assert failures <= 3 + 2 + outage / 1 + 2 < sent_in_outage, failures
    assert esps["mailgun"].ledger.count() > 0
    assert esps["sendgrid"].ledger.count() > 0  # closed again after the outage
    last_sendgrid = max(e.accepted_at for e in esps["sendgrid"].ledger.entries())
    last_mailgun = max(e.accepted_at for e in esps["mailgun"].ledger.entries())
    assert last_sendgrid > last_mailgun


def test_poison_that_kills_its_process_is_dead_lettered_batch_mates_sent_once(esps, spawn, tmp_path):
    ids = messages_create(60, priority=2)
    [poison_id] = messages_create(1, priority=2, prefix="crash")
    EmailMessage.objects.filter(id=poison_id).update(recipient="crash@x.example")
    env = _env(esps, "sendgrid", NOTIFIER_FAULT_CRASH_RECIPIENT="crash@x.example")
    send_workers(spawn, tmp_path, env, "normal", concurrency=2)
    messages_enqueue(message_ids=[*ids[:30], poison_id, *ids[30:]], priority=2)  # one batch
    everything = [poison_id, *ids]
    assert wait_for(lambda: settled(everything), timeout=150, interval=0.2), statuses(everything)
    assert statuses(ids) == {Status.SENT: 60}
    assert DeadLetter.objects.filter(message_id=poison_id).exists()
    assert EmailMessage.objects.get(id=poison_id).attempts == 9  # P2 allows 8
    assert ledger_counts(esps, ids) == ([], {}, {})
