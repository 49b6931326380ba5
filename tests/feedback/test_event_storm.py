"""1,000 messages, each event delivered 1 to 40 times, shuffled, POSTed signed over HTTP to the
live server and processed by a real ops worker (2 processes): final statuses, campaign counters
and suppressions are exact (F16)."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import timedelta

import pytest
import requests

from audience.models import Suppression
from delivery.models import EmailMessage
from feedback.models import CampaignEventCounter, EmailEvent, WebhookDelivery
from testkit import processes
from testkit.waiting import wait_for as wait_until
from tests.feedback import samples
from tests.feedback.helpers import T0, campaign, sent_messages

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status
RANK = ["SENT", "DELIVERED", "OPENED", "CLICKED", "BOUNCED", "COMPLAINED"]


def plan_events(messages: list[EmailMessage], rng: random.Random) -> dict[int, list[str]]:
    """Which SendGrid event kinds each message gets (a realistic mix)."""
    plan = {}
    for m in messages:
        roll = rng.random()
        if roll < 0.05:
            kinds = ["bounce"]
        elif roll < 0.07:
            kinds = ["delivered", "open", "spamreport"]
        else:
            kinds = ["delivered"] + (["open"] if roll < 0.7 else []) + (["click"] if roll < 0.35 else [])
            kinds += ["unsubscribe"] if roll > 0.97 else []
        plan[m.id] = kinds
    return plan


def expected_status(kinds: list[str]) -> str:
    names = {"delivered": "DELIVERED", "open": "OPENED", "click": "CLICKED", "bounce": "BOUNCED",
             "spamreport": "COMPLAINED"}
    return max((names[k] for k in kinds if k in names), key=RANK.index, default="SENT")




def test_each_event_delivered_1_to_40_times_shuffled_counts_once(
    live_server, webhook_keys, process_env, spawn, tmp_path
):
    rng = random.Random(6)
    c = campaign()
    messages = sent_messages(1000, campaign_obj=c)
    plan = plan_events(messages, rng)
    copies = []
    for m in messages:
        for offset, kind in enumerate(plan[m.id]):
            event = samples.sendgrid_event(kind, message_id=m.id, recipient=m.recipient,
                                           when=T0 + timedelta(seconds=offset), event_id=f"sg-{m.id}-{kind}")
            copies += [event] * rng.randint(1, 40)
    rng.shuffle(copies)
    worker = spawn(processes.ops_worker(process_env, tmp_path))
    worker.wait_for_log("ready.", timeout=60)
    for start in range(0, len(copies), 500):
        body = json.dumps(copies[start:start + 500]).encode()
        headers = {"Content-Type": "application/json", **webhook_keys.sendgrid.sign(body)}
        url = f"{live_server.url}/webhooks/sendgrid/"
        response = requests.post(url, data=body, headers=headers, timeout=30)
        assert response.status_code == 200, response.text
    posts = -(-len(copies) // 500)
    assert WebhookDelivery.objects.count() == posts
    assert wait_until(lambda: not WebhookDelivery.objects.filter(status="pending").exists(), timeout=180), (
        worker.log()[-3000:]
    )
    assert not WebhookDelivery.objects.filter(status="failed").exists()

    unique_events = sum(len(kinds) for kinds in plan.values())
    assert EmailEvent.objects.count() == unique_events
    statuses = dict(EmailMessage.objects.filter(campaign=c).values_list("id", "status"))
    expected = {mid: expected_status(kinds) for mid, kinds in plan.items()}
    wrong = {mid: (statuses[mid], want) for mid, want in expected.items() if statuses[mid] != want}
    assert wrong == {}
    tally = Counter(k for kinds in plan.values() for k in kinds)
    counter = CampaignEventCounter.objects.get(campaign=c)
    delivered = sum(1 for kinds in plan.values() if {"delivered", "open", "click"} & set(kinds))
    assert (counter.delivered, counter.opened, counter.clicked) == (delivered, tally["open"], tally["click"])
    assert (counter.bounced, counter.complained, counter.unsubscribed) == (
        tally["bounce"], tally["spamreport"], tally["unsubscribe"]
    )
    suppressed = {m.recipient for m in messages if {"bounce", "spamreport", "unsubscribe"} & set(plan[m.id])}
    assert set(Suppression.objects.values_list("email", flat=True)) == suppressed
