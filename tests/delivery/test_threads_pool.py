"""A `threads` pool (NOTIFIER_WORKER_POOL=threads) sends through one provider instance per thread.

A provider holds a live connection (an SMTP session, an HTTP pool); two threads interleaving
commands on one SMTP session corrupt both transactions. The in-process test pins the registry's
contract; the e2e test runs a real critical pool of four threads against a recording SMTP server
and counts every message: each arrives once, to its own recipient, and is SENT.
"""

from __future__ import annotations

import threading
import time

import pytest

from delivery.models import EmailMessage
from delivery.providers import get_provider
from delivery.services.dispatch import messages_enqueue
from testkit import processes
from tests.factories import email_message, template_version

Status = EmailMessage.Status


def _provider_in_thread(name: str) -> object:
    built: list[object] = []
    thread = threading.Thread(target=lambda: built.append(get_provider(name)))
    thread.start()
    thread.join()
    return built[0]


def test_each_thread_gets_its_own_provider_and_keeps_it():
    mine = get_provider("smtp")
    assert get_provider("smtp") is mine
    other = _provider_in_thread("smtp")
    assert other is not mine
    get_provider.cache_clear()
    assert get_provider("smtp") is not mine  # settings changed: every thread builds anew


def test_an_unknown_provider_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown provider 'pigeon'"):
        get_provider("pigeon")


@pytest.mark.e2e
@pytest.mark.slow
def test_a_threads_critical_pool_sends_every_message_once_over_smtp(process_env, smtp_server, spawn,
                                                                   tmp_path):
    smtp_server.handler.hang_seconds = 0.02  # keeps sessions open long enough to overlap
    version = template_version()
    ids = [email_message(version=version, recipient=f"otp{i}@example.com").id for i in range(40)]
    env = {**process_env, "NOTIFIER_PROVIDERS": "smtp", "NOTIFIER_WORKER_POOL": "threads"}
    spawn(processes.celery_worker("critical", env, tmp_path, concurrency=4)).wait_for_log("ready.", 60)
    for message_id in ids:
        messages_enqueue(message_ids=[message_id], priority=0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and EmailMessage.objects.filter(
            id__in=ids, status__in=[Status.QUEUED, Status.SENDING]).exists():
        time.sleep(0.2)
    statuses = dict(EmailMessage.objects.filter(id__in=ids).values_list("id", "status"))
    assert [i for i in ids if statuses[i] != Status.SENT] == []
    arrived = smtp_server.handler.ids()
    assert sorted(arrived) == sorted(str(i) for i in ids)  # none lost, none twice
    by_id = {m["X-Notifier-Message-Id"]: m["To"] for m in smtp_server.handler.messages}
    recipients = dict(EmailMessage.objects.filter(id__in=ids).values_list("id", "recipient"))
    assert {int(k): v for k, v in by_id.items()} == recipients
