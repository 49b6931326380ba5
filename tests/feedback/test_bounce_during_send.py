"""Hard bounces arriving while a campaign is still sending (F17), with real processes: a send
worker (normal priority) mailing a local SMTP server, an ops worker processing the webhooks, and
signed SES bounce notifications POSTed to the live server. Once an address's suppression has
committed, no batch claimed afterwards sends to it; everything else arrives exactly once."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import requests
from django.utils import timezone

from audience.models import Suppression
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from testkit import processes
from tests.feedback import samples
from tests.feedback.helpers import campaign, sent_messages

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status


def queued_campaign(size: int):
    c = campaign()
    version = c.template_version
    rows = [
        EmailMessage(campaign=c, recipient=f"reader{i:04d}@example.com", template_version=version,
                     context={"name": f"Reader {i}"}, priority=2, idempotency_key=f"c{c.id}:{i}")
        for i in range(size)
    ]
    return c, EmailMessage.objects.bulk_create(rows)


def test_no_send_to_an_address_after_its_hard_bounce_commits(
    live_server, webhook_keys, smtp_server, process_env, spawn, tmp_path
):
    c, messages = queued_campaign(600)
    targets = [m.recipient for m in messages[400:]]  # batches 5 and 6 of 100
    earlier = sent_messages(len(targets), prefix="earlier")  # the sends that now bounce
    for message, address in zip(earlier, targets, strict=True):
        EmailMessage.objects.filter(pk=message.pk).update(recipient=address)
    env = {**process_env, "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM": "2.0", "NOTIFIER_WORKER_P2_CONCURRENCY": "1"}
    spawn(processes.celery_worker("normal", env, tmp_path)).wait_for_log("ready.", timeout=60)
    ops = processes.ops_worker(process_env, tmp_path, concurrency=1)
    spawn(ops).wait_for_log("ready.", timeout=60)
    ids = [m.id for m in messages]
    messages_enqueue(message_ids=ids[:500], priority=2)  # the last batch joins later (below)

    deadline = time.monotonic() + 60
    while not EmailMessage.objects.filter(campaign=c, status=Status.SENT).exists():
        assert time.monotonic() < deadline, "the campaign never started sending"
        time.sleep(0.05)
    for message, address in zip(earlier, targets, strict=True):
        ses = samples.ses_event("Bounce", message_id=message.id, recipient=address, when=timezone.now())
        body = json.dumps(webhook_keys.sns.notification(ses)).encode()
        response = requests.post(f"{live_server.url}/webhooks/ses/", data=body, timeout=10,
                                 headers={"Content-Type": "text/plain; charset=UTF-8"})
        assert response.status_code == 200, response.text

    observed: dict[str, float] = {}  # when the test first saw each suppression committed
    deadline = time.monotonic() + 120
    last_batch_enqueued = False
    while not last_batch_enqueued or len(observed) < len(targets) or EmailMessage.objects.filter(
        campaign=c, status__in=[Status.QUEUED, Status.SENDING]
    ).exists():
        assert time.monotonic() < deadline, ops.log()[-2000:]
        now = timezone.now()
        for email in Suppression.objects.filter(email__in=targets).values_list("email", flat=True):
            observed.setdefault(email, now)
        if not last_batch_enqueued and len(observed) == len(targets):
            # The campaign's last batch is published only now (as a slow fan-out would), so
            # some sends are certainly decided after the suppressions committed, whatever the
            # machine's load; batch 5 races with the bounces.
            messages_enqueue(message_ids=ids[500:], priority=2)
            last_batch_enqueued = True
        time.sleep(0.05)

    rows = {m.recipient: m for m in EmailMessage.objects.filter(campaign=c)}
    late_claims = [a for a in targets if rows[a].claimed_at and rows[a].claimed_at > observed[a]]
    assert len(late_claims) >= 100
    sent_after_commit = [a for a in late_claims if rows[a].status != Status.SUPPRESSED]
    assert sent_after_commit == []
    received = Counter(m["To"] for m in smtp_server.handler.messages)
    assert all(received[a] == 0 for a in late_claims)
    # Nothing lost, nothing duplicated: every non-suppressed message arrived exactly once.
    delivered = {a for a, m in rows.items() if m.status == Status.SENT}
    assert {a for a, n in received.items() if n == 1} == delivered
    assert [a for a, n in received.items() if n > 1] == []
    assert {m.status for m in rows.values()} <= {Status.SENT, Status.SUPPRESSED}
