"""Schedule types end to end: HTTP API -> due set -> scheduler process -> worker -> SMTP server.

Counts lost and duplicate deliveries; "not early" is each row's send time against its due time.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest
import requests
from django.utils import timezone

from delivery.models import EmailMessage
from scheduling import timing
from testkit import processes
from testkit.waiting import wait_for as _wait_for

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status


def _post(live_server, key: str, schedule: dict, to: str = "ada@example.com") -> dict:
    body = {"to": to, "template": "otp", "priority": "normal", "context": {"name": "Ada", "code": "7"},
            "schedule": schedule}
    response = requests.post(f"{live_server.url}/api/v1/messages", json=body,
                             headers={"Authorization": f"Api-Key {key}"}, timeout=10)
    assert response.status_code == 202, response.text
    return response.json()




def test_scheduled_delayed_and_local_time_sends_arrive_once_at_their_time(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    spawn(processes.celery_worker("normal", process_env, tmp_path)).wait_for_log("ready.")
    spawn(processes.scheduler(process_env, tmp_path)).wait_for_log("scheduler ready")
    now = timezone.now()
    kathmandu = timing.zone("Asia/Kathmandu")  # +05:45
    local = (now + timedelta(seconds=5)).astimezone(kathmandu).time().replace(microsecond=0)
    ids = [
        _post(live_server, api_key, {"type": "scheduled",
                                     "send_at": (now + timedelta(seconds=4)).isoformat()})["id"],
        _post(live_server, api_key, {"type": "delayed", "delay_seconds": 4})["id"],
        _post(live_server, api_key, {"type": "local_time", "local_time": local.isoformat(),
                                     "timezone": "Asia/Kathmandu"})["id"],
    ]
    assert EmailMessage.objects.filter(id__in=ids, status=Status.SCHEDULED).count() == 3
    time.sleep(2)
    assert smtp_server.handler.ids() == []  # nothing early
    assert _wait_for(lambda: len(smtp_server.handler.ids()) == 3, timeout=20)
    time.sleep(1)
    received = Counter(smtp_server.handler.ids())
    assert received == {str(pk): 1 for pk in ids}
    for message in EmailMessage.objects.filter(id__in=ids):
        assert message.status == Status.SENT
        assert message.scheduled_for <= message.sent_at <= message.scheduled_for + timedelta(seconds=5)


def test_cancel_at_the_due_second_either_cancels_or_sends_never_both(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    spawn(processes.celery_worker("normal", process_env, tmp_path)).wait_for_log("ready.")
    spawn(processes.scheduler({**process_env, "NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS": "5"}, tmp_path))
    count = 60
    keys = [f"cart-{n}" for n in range(count)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        created = list(pool.map(
            lambda n: _post(live_server, api_key, {"type": "delayed", "delay_seconds": 6,
                                                   "cancel_key": keys[n]}, to=f"user{n}@example.com"),
            range(count)))
    due_times = sorted(datetime.fromisoformat(c["scheduled_for"]) for c in created)
    # Start cancelling just before the median due time: some go before, some after dispatch.
    time.sleep(max(0.0, (due_times[count // 2] - timezone.now()).total_seconds() - 0.2))

    def cancel(key: str) -> dict:
        response = requests.post(f"{live_server.url}/api/v1/schedules/cancel", json={"cancel_key": key},
                                 headers={"Authorization": f"Api-Key {api_key}"}, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = dict(zip(keys, pool.map(cancel, keys), strict=True))
    by_key = {c["id"]: key for c, key in zip(created, keys, strict=True)}
    cancelled = {pk for pk, key in by_key.items() if answers[key]["cancelled"] == 1}
    dispatched = set(by_key) - cancelled
    assert all(answers[by_key[pk]]["already_dispatched"] == 1 for pk in dispatched)
    assert _wait_for(lambda: EmailMessage.objects.filter(id__in=dispatched, status=Status.SENT).count()
                     == len(dispatched), timeout=30)
    time.sleep(2)
    received = Counter(int(i) for i in smtp_server.handler.ids())
    assert set(received) == dispatched and all(n == 1 for n in received.values())  # 0 lost, 0 dup
    assert EmailMessage.objects.filter(id__in=cancelled, status=Status.CANCELLED).count() == len(cancelled)
    print(f"race outcome: {len(cancelled)} cancelled, {len(dispatched)} sent")
