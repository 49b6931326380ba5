"""POST /api/v1/messages/batch end to end: HTTP API -> one INSERT -> one publish per priority ->
real critical and normal Celery pools -> a recording SMTP server. Counts lost and duplicate
deliveries over every accepted item, replays included."""

from __future__ import annotations

from collections import Counter

import pytest
import requests

from delivery.models import EmailMessage
from testkit import processes
from testkit.waiting import wait_for

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status


def _post(live_server, key: str, messages: list[dict]) -> requests.Response:
    return requests.post(f"{live_server.url}/api/v1/messages/batch", json={"messages": messages},
                         headers={"Authorization": f"Api-Key {key}"}, timeout=30)


def _items(tag: str, n: int) -> list[dict]:
    """n messages alternating critical and normal, every fifth with an idempotency key."""
    return [{"to": f"{tag}-{i}@example.com", "template": "otp", "context": {"name": tag, "code": str(i)},
             "priority": "critical" if i % 2 else "normal",
             **({"idempotency_key": f"{tag}-{i}"} if i % 5 == 0 else {})} for i in range(n)]


def test_every_accepted_item_of_a_batch_is_sent_once(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    for role in ("critical", "normal"):
        spawn(processes.celery_worker(role, process_env, tmp_path, concurrency=2)).wait_for_log("ready.")
    first = _items("a", 150)
    answers = [_post(live_server, api_key, first),
               _post(live_server, api_key, [*_items("b", 100), {"to": "bad", "template": "otp"}])]
    assert [a.status_code for a in answers] == [202, 207], answers[1].text[:500]
    # The first batch again: its keyed items replay (nothing new), the others are new messages.
    again = _post(live_server, api_key, first)
    assert again.status_code == 202
    replayed = [r for r in again.json()["results"] if r.get("replayed")]
    assert len(replayed) == 30
    accepted = {r["id"] for a in [*answers, again] for r in a.json()["results"] if "id" in r}
    assert len(accepted) == 150 + 100 + 120
    assert wait_for(lambda: EmailMessage.objects.filter(status=Status.SENT).count() == len(accepted),
                    timeout=60)
    received = Counter(smtp_server.handler.ids())
    lost = sorted(m for m in accepted if received[str(m)] == 0)
    duplicates = {m: n for m, n in received.items() if n > 1}
    assert (lost, duplicates, len(received)) == ([], {}, len(accepted))
