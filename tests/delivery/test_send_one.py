"""The single-message path (delivery/services/send_one.py) keeps every guarantee of a batch.

In-process tests drive the real task (`delivery.send_batch` with one P0/P1 id) against the fake
ESPs on 127.0.0.1 (real PostgreSQL and Redis); the last test runs a real critical pool with a
message that kills its process while rendering. Each counts lost, duplicate and cross-ESP
duplicate messages from the fakes' ledgers.
"""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audience.models import Suppression
from delivery.models import DeadLetter, DeliveryAttempt, EmailMessage
from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue
from delivery.services.send_one import message_send_one
from delivery.tasks import send_batch
from notifier.celery import app as celery_app
from testkit import processes
from tests.delivery.conftest import esp_env, ledger_counts
from tests.factories import email_message, template_version

Status = EmailMessage.Status


def _task(message_id: int, priority: int = 0, task_id: str | None = None) -> dict[str, int]:
    """The real Celery task, run in this process with `task_id` as its claim token: its summary."""
    summary = send_batch.apply(args=([message_id], priority), task_id=task_id or uuid.uuid4().hex).get()
    return {key: int(value) for key, _, value in (part.partition("=") for part in summary.split())}


@pytest.mark.django_db
class TestInProcess:
    def test_a_p1_message_costs_three_statements(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        version = template_version()
        email_message(version=version)  # warms the per-process template cache
        _task(email_message(version=version).id)
        message = email_message(version=version)
        with CaptureQueriesContext(connection) as queries:
            _task(message.id, priority=1)
        # claim+load+suppression, hand-off mark, SENT mark+attempt row (the batch path: eight);
        # the test's transaction puts the one with an INSERT under a savepoint (execute_routed)
        statements = [q["sql"][:80] for q in queries if "SAVEPOINT" not in q["sql"]]
        assert len(statements) == 3, statements
        assert EmailMessage.objects.get(id=message.id).status == Status.SENT
        assert DeliveryAttempt.objects.filter(message=message, outcome="accepted").count() == 1
        assert ledger_counts(esps, [message.id]) == ([], {}, {})

    def test_suppressed_after_enqueue_is_not_sent(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        message = email_message(recipient="Later@Example.com")
        Suppression.objects.create(email="later@example.com")
        assert _task(message.id)["sent"] == 0
        assert EmailMessage.objects.get(id=message.id).status == Status.SUPPRESSED
        assert esps["sendgrid"].ledger.count() == 0

    def test_redelivered_task_reclaims_its_row_and_sends_it_once(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        message = email_message()
        token = uuid.uuid4().hex
        ledger.messages_claim(message_ids=[message.id], token=token)  # first run died here
        assert _task(message.id, task_id=token)["sent"] == 1
        assert _task(message.id, task_id=token)["sent"] == 0  # and a third copy finds it SENT
        row = EmailMessage.objects.get(id=message.id)
        assert (row.status, row.attempts) == (Status.SENT, 2)
        assert ledger_counts(esps, [message.id]) == ([], {}, {})

    def test_another_task_cannot_take_a_claimed_row(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        message = email_message()
        ledger.messages_claim(message_ids=[message.id], token="the-owner")
        assert _task(message.id)["sent"] == 0
        assert EmailMessage.objects.get(id=message.id).claim_token == "the-owner"
        assert esps["sendgrid"].ledger.count() == 0

    def test_primary_failure_fails_over_to_the_secondary_once(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
        esps["sendgrid"].faults.error_5xx(503)
        message = email_message()
        assert _task(message.id)["sent"] == 1
        row = EmailMessage.objects.get(id=message.id)
        assert (row.status, row.provider) == (Status.SENT, "mailgun")
        outcomes = list(DeliveryAttempt.objects.filter(message=message).order_by("id")
                        .values_list("provider", "outcome"))
        assert outcomes == [("sendgrid", "transient"), ("mailgun", "accepted")]
        assert ledger_counts(esps, [message.id]) == ([], {}, {})

    def test_ambiguous_is_held_never_sent_to_the_secondary(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid", "mailgun"]
        settings.ESP_READ_TIMEOUT_SECONDS = 0.5
        esps["sendgrid"].faults.accept_then_hang(hang_seconds=2, next_n=1)
        message = email_message()
        _task(message.id)
        assert EmailMessage.objects.get(id=message.id).status == Status.AMBIGUOUS
        assert esps["mailgun"].ledger.count() == 0

    def test_transient_failures_dead_letter_after_the_p0_limit(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        settings.NOTIFIER_BREAKER_FAILURES = 1000
        esps["sendgrid"].faults.error_5xx(500)
        message = email_message()
        for attempt in range(1, 6):  # P0: five attempts
            result = _task(message.id)
            assert EmailMessage.objects.get(id=message.id).attempts == attempt
        assert (result["retry"], result["dead"]) == (0, 1)
        dead = DeadLetter.objects.get(message=message)
        assert len(dead.attempts) == 5 and "500" in dead.final_error
        assert EmailMessage.objects.get(id=message.id).status == Status.FAILED

    def test_render_failure_fails_the_message_without_a_provider_call(self, settings, esps):
        settings.NOTIFIER_PROVIDERS = ["sendgrid"]
        version = template_version(html_body="<p>{{ missing }}</p>")
        message = email_message(version=version, context={})
        report = message_send_one(message_id=message.id, token=uuid.uuid4().hex)
        assert report.failed == 1
        assert EmailMessage.objects.get(id=message.id).error.startswith("render failed")
        assert esps["sendgrid"].ledger.count() == 0


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_p0_worker_killed_while_rendering_is_redelivered_then_dead_lettered(esps, spawn, tmp_path):
    """A P0 message that kills its process mid-render comes back (same task id) until its
    attempts run out; the suppressed one is dropped at send; the rest go out exactly once."""
    celery_app.control.purge()
    version = template_version()
    ids = [email_message(version=version, recipient=f"otp{i}@example.com").id for i in range(20)]
    poison = email_message(version=version, recipient="crash@example.com").id
    suppressed = email_message(version=version, recipient="gone@example.com").id
    env = processes.subprocess_env(NOTIFIER_PROVIDERS="sendgrid", **esp_env(esps),
                                   NOTIFIER_FAULT_CRASH_RECIPIENT="crash@example.com")
    spawn(processes.celery_worker("critical", env, tmp_path, concurrency=2)).wait_for_log("ready.", 60)
    Suppression.objects.create(email="gone@example.com")
    messages_enqueue(message_ids=[poison], priority=0)
    for message_id in [*ids, suppressed]:
        messages_enqueue(message_ids=[message_id], priority=0)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and EmailMessage.objects.filter(
            id__in=[*ids, poison, suppressed], status__in=[Status.QUEUED, Status.SENDING]).exists():
        time.sleep(0.2)
    statuses = dict(EmailMessage.objects.filter(id__in=[poison, suppressed]).values_list("id", "status"))
    assert statuses == {poison: Status.FAILED, suppressed: Status.SUPPRESSED}
    assert DeadLetter.objects.filter(message_id=poison).exists()
    assert EmailMessage.objects.get(id=poison).attempts == 6  # five tries, the sixth claim gives up
    assert EmailMessage.objects.filter(id__in=ids, status=Status.SENT).count() == 20
    assert ledger_counts(esps, ids) == ([], {}, {})
    assert esps["sendgrid"].ledger.count() == 20
    celery_app.control.purge()
