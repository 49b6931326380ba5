"""F17 at the claim boundary: a suppression that commits after a worker claimed (or read) a row
but before the row is handed to the provider stops that send.

tests/feedback/test_bounce_during_send.py proves it for batches claimed after the suppression
commits. This is the race inside a batch: a real worker process, paused by a fault hook
(tests/faults/) right after its claim or right before it renders, holds rows it has already
checked against the suppression list; the test commits suppressions for half of them through
the API meanwhile, checks that no row has been handed over yet (so each suppression surely
committed before its provider call), and then counts what reached the SMTP sink: nothing for a
suppressed address, everything else exactly once. Each pool's send path is covered: P0's single
message path, P2's claim-then-render batch, P3's claim-and-hand-off-in-one-write batch.
"""

from __future__ import annotations

from collections import Counter

import pytest

from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from testkit import processes
from testkit.waiting import wait_for
from tests.factories import template_version

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Status = EmailMessage.Status
ROLES = {"critical": 0, "normal": 2, "low": 3}
# (role, hook, its pause in seconds, messages). P0 tasks carry one message each: two processes
# hold one each. The render hook pauses before each message of a batch: 10 x 0.5 s.
CASES = [
    ("critical", "NOTIFIER_FAULT_PAUSE_BEFORE_RENDER", "4", 2),
    ("normal", "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM", "4", 10),
    ("normal", "NOTIFIER_FAULT_PAUSE_BEFORE_RENDER", "0.5", 10),
    ("low", "NOTIFIER_FAULT_PAUSE_BEFORE_RENDER", "0.5", 10),
]


def _queued(count: int, priority: int) -> list[EmailMessage]:
    version = template_version()
    return EmailMessage.objects.bulk_create(
        EmailMessage(recipient=f"reader{i}-p{priority}@example.com", context={"name": f"R{i}"},
                     template_version=version, priority=priority, idempotency_key=f"race-{version.id}-{i}")
        for i in range(count)
    )


def _not_handed_over(ids: list[int]) -> bool:
    """No row has a hand-off mark or a final state yet: the provider has been offered none."""
    rows = EmailMessage.objects.filter(id__in=ids)
    return all(m.send_started_at is None and m.status in (Status.QUEUED, Status.SENDING) for m in rows)


@pytest.mark.parametrize(("role", "hook", "pause", "count"), CASES)
def test_no_send_to_an_address_suppressed_between_claim_and_hand_off(
    role, hook, pause, count, api, smtp_server, process_env, spawn, tmp_path
):
    priority = ROLES[role]
    messages = _queued(count, priority)
    ids = [m.id for m in messages]
    env = {**process_env, hook: pause, "NOTIFIER_PROVIDERS": "smtp"}
    worker = spawn(processes.celery_worker(role, env, tmp_path, concurrency=2))
    worker.wait_for_log("ready.", timeout=90)
    messages_enqueue(message_ids=ids, priority=priority)

    # Every message is held by a paused worker process (one batch, or one P0 task per process).
    holders = 1 if count > 2 else count
    paused = lambda: worker.log().count("fault: pausing") >= holders  # noqa: E731
    assert wait_for(paused, timeout=30), worker.log()[-3000:]
    targets = [m.recipient for m in messages[::2]]
    for address in targets:
        body = {"email": address, "reason": "hard_bounce"}
        response = api.post("/api/v1/suppressions", body, format="json")
        assert response.status_code == 201, response.content
    # The race is real: each suppression committed after its row was claimed or read for sending,
    # and before any row was handed to the provider.
    assert _not_handed_over(ids), "the pause ended before the suppressions committed: lengthen it"

    settled = lambda: not EmailMessage.objects.filter(  # noqa: E731
        id__in=ids, status__in=[Status.QUEUED, Status.SENDING]).exists()
    assert wait_for(settled, timeout=60, interval=0.1), worker.log()[-3000:]
    statuses = dict(EmailMessage.objects.filter(id__in=ids).values_list("recipient", "status"))
    received = Counter(m["To"] for m in smtp_server.handler.messages)
    assert [a for a in targets if received[a]] == []  # 0 sends after the suppression committed
    assert {a for a in targets if statuses[a] != Status.SUPPRESSED} == set()
    others = [m.recipient for m in messages if m.recipient not in targets]
    assert {a: received[a] for a in others} == {a: 1 for a in others}  # 0 lost, 0 duplicates
    assert {statuses[a] for a in others} == {Status.SENT}
