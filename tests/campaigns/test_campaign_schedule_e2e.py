"""Scheduled campaigns end to end with real processes: API (live server) -> fan-out (ops worker)
-> due set -> scheduler process -> send worker -> SMTP server on 127.0.0.1.

Every test counts lost and duplicate deliveries per recipient and checks that nothing left
before its time (no SMTP delivery before the due instant; `send_started_at >= scheduled_for`).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
import requests
from django.utils import timezone

from audience.models import Contact, Segment
from campaigns.models import Campaign
from delivery.models import EmailMessage
from scheduling import timing
from testkit import processes
from testkit.waiting import wait_for
from tests import factories
from tests.campaigns.helpers import contacts_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.usefixtures("clean_due_set")]
MS = EmailMessage.Status
CS = Campaign.Status


@pytest.fixture
def template(db):
    return factories.template_version(subject="Sale for {{ name }}", html_body="<p>Hello {{ name }}</p>")


def _received(smtp_server) -> Counter:
    with smtp_server.handler.lock:
        return Counter(m["To"] for m in smtp_server.handler.messages)


def _group(name: str, n: int, start: int) -> Segment:
    contacts_create(n, prefix=f"{name}-", start=start, attributes={"group": name})
    return Segment.objects.create(client=factories.owner(), name=name, definition={
        "conditions": [{"attribute": "group", "op": "equals", "value": name}]})


def _launch(live_server, key: str, template, segment: Segment, schedule: dict) -> Campaign:
    body = {"template_id": template.template_id, "priority": "normal", "schedule": schedule,
            "recipients": {"type": "segment", "segment_id": segment.pk}}
    response = requests.post(f"{live_server.url}/api/v1/notifications/email", json=body,
                             headers={"Authorization": f"Api-Key {key}"}, timeout=10)
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "SCHEDULED"
    return Campaign.objects.get(pk=response.json()["campaign_id"])


def _action(live_server, key: str, campaign: Campaign, action: str) -> str:
    response = requests.post(f"{live_server.url}/api/v1/campaigns/{campaign.pk}/{action}",
                             headers={"Authorization": f"Api-Key {key}"}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()["status"]


def _start(spawn, env, tmp_path, **extra: str) -> None:
    env = {**env, **extra}
    ops = spawn(processes.ops_worker(env, tmp_path, concurrency=1))
    send = spawn(processes.celery_worker("normal", env, tmp_path, concurrency=2))
    scheduler = spawn(processes.scheduler(env, tmp_path))
    ops.wait_for_log("ready.", timeout=60)
    send.wait_for_log("ready.", timeout=60)
    scheduler.wait_for_log("scheduler ready", timeout=60)


def _status(campaign: Campaign) -> str:
    return Campaign.objects.get(pk=campaign.pk).status


def _sleep_until(when: datetime) -> None:
    time.sleep(max(0.0, (when - timezone.now()).total_seconds()))


def _not_early(campaign: Campaign) -> None:
    for started, due_at in EmailMessage.objects.filter(campaign=campaign, status=MS.SENT).values_list(
            "send_started_at", "scheduled_for"):
        assert started >= due_at, (started, due_at)


def test_scheduled_campaign_arrives_once_per_recipient_at_send_at_and_a_lost_fanout_recovers(
    live_server, api_key, template, smtp_server, process_env, spawn, tmp_path
):
    scheduled, lost_segment = _group("sale", 40, 0), _group("lost", 20, 100)
    _start(spawn, process_env, tmp_path, NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS="2")
    # A campaign whose fan-out task never reached the broker: QUEUED, no progress.
    lost = Campaign.objects.create(name="lost", template_version=template, status=CS.QUEUED,
                                   audience={"client_id": factories.owner().pk, "type": "segment",
                                             "definition": lost_segment.definition})
    send_at = (timezone.now() + timedelta(seconds=8)).replace(microsecond=0)
    campaign = _launch(live_server, api_key, template, scheduled, {"type": "scheduled",
                                                                   "send_at": send_at.isoformat()})
    assert wait_for(lambda: Campaign.objects.get(pk=campaign.pk).fanout_done, timeout=30)
    assert _status(campaign) == CS.SCHEDULED
    _sleep_until(send_at - timedelta(seconds=0.5))
    early = [to for to in _received(smtp_server) if to.startswith("sale-")]
    assert early == []  # nothing before send_at
    expected = {f"sale-{i}@example.com" for i in range(40)}
    expected |= {f"lost-{i}@example.com" for i in range(100, 120)}
    assert wait_for(lambda: set(_received(smtp_server)) >= expected, timeout=90, interval=0.5)
    assert wait_for(lambda: _status(campaign) == CS.COMPLETED and _status(lost) == CS.COMPLETED, timeout=60)
    time.sleep(2)
    received = _received(smtp_server)
    lost_count = len(expected - set(received))
    duplicates = sum(n - 1 for n in received.values() if n > 1)
    assert (lost_count, duplicates, set(received)) == (0, 0, expected)
    _not_early(campaign)
    started = EmailMessage.objects.filter(campaign=campaign).values_list("send_started_at", flat=True)
    assert min(started) >= send_at


def test_local_time_sends_each_recipient_at_the_wall_time_of_their_zone(
    live_server, api_key, template, smtp_server, process_env, spawn, tmp_path
):
    zones = {"paris": "Europe/Paris", "berlin": "Europe/Berlin", "lagos": "Africa/Lagos",
             "nowhere": "", "ny": "America/New_York"}
    for name, tz in zones.items():
        Contact.objects.create(client=factories.owner(), email=f"{name}@example.com", timezone=tz,
                               attributes={"g": "lt"})
    segment = Segment.objects.create(client=factories.owner(), name="lt", definition={
        "conditions": [{"attribute": "g", "op": "equals", "value": "lt"}]})
    _start(spawn, process_env, tmp_path)
    due_at = (timezone.now() + timedelta(seconds=8)).replace(microsecond=0)
    wall = due_at.astimezone(timing.zone("Europe/Paris")).time()
    campaign = _launch(live_server, api_key, template, segment, {
        "type": "local_time", "local_time": wall.isoformat(), "timezone": "Africa/Algiers"})
    assert wait_for(lambda: Campaign.objects.get(pk=campaign.pk).fanout_done, timeout=30)
    rows = dict(EmailMessage.objects.filter(campaign=campaign).values_list("recipient", "scheduled_for"))
    # Same offset in November (UTC+1) -> the same instant; New York's 8 a.m. wall time is ahead.
    assert {rows[f"{n}@example.com"] for n in ("paris", "berlin", "lagos", "nowhere")} == {due_at}
    ny = timing.next_occurrence(wall, timing.zone("America/New_York"), now=due_at - timedelta(seconds=8))
    assert rows["ny@example.com"] == ny and ny > due_at + timedelta(hours=1)
    _sleep_until(due_at - timedelta(seconds=0.5))
    assert _received(smtp_server) == Counter()
    expected = {f"{n}@example.com" for n in ("paris", "berlin", "lagos", "nowhere")}
    assert wait_for(lambda: set(_received(smtp_server)) >= expected, timeout=60, interval=0.5)
    time.sleep(2)
    received = _received(smtp_server)
    assert received == Counter({to: 1 for to in expected})  # 0 lost, 0 duplicates, NY not yet
    _not_early(campaign)
    assert EmailMessage.objects.get(campaign=campaign, recipient="ny@example.com").status == MS.SCHEDULED
    assert _status(campaign) == CS.SENDING


def test_paused_scheduled_campaign_is_held_past_its_time_then_sent_once_and_cancelled_one_never(
    live_server, api_key, template, smtp_server, process_env, spawn, tmp_path
):
    paused_segment, cancelled_segment = _group("held", 30, 0), _group("gone", 30, 100)
    _start(spawn, process_env, tmp_path)
    send_at = (timezone.now() + timedelta(seconds=8)).replace(microsecond=0)
    schedule = {"type": "scheduled", "send_at": send_at.isoformat()}
    paused = _launch(live_server, api_key, template, paused_segment, schedule)
    cancelled = _launch(live_server, api_key, template, cancelled_segment, schedule)
    assert wait_for(lambda: all(Campaign.objects.filter(pk__in=[paused.pk, cancelled.pk])
                                .values_list("fanout_done", flat=True)), timeout=30)
    assert _action(live_server, api_key, paused, "pause") == CS.PAUSED
    assert _action(live_server, api_key, cancelled, "cancel") == CS.CANCELLED
    _sleep_until(send_at + timedelta(seconds=6))
    assert _received(smtp_server) == Counter()  # due, but held (paused) or cancelled
    held = Counter(EmailMessage.objects.filter(campaign=paused).values_list("status", flat=True))
    assert held == {MS.QUEUED: 30}  # fenced by the scheduler, not claimed by any worker
    assert _status(paused) == CS.PAUSED
    assert _action(live_server, api_key, paused, "resume") == CS.QUEUED
    expected = {f"held-{i}@example.com" for i in range(30)}
    assert wait_for(lambda: set(_received(smtp_server)) >= expected, timeout=60, interval=0.5)
    assert wait_for(lambda: _status(paused) == CS.COMPLETED, timeout=60)
    time.sleep(2)
    received = _received(smtp_server)
    assert received == Counter({to: 1 for to in expected})  # 0 lost, 0 duplicates, none cancelled
    statuses = Counter(EmailMessage.objects.filter(campaign=cancelled).values_list("status", flat=True))
    assert statuses == {MS.CANCELLED: 30}
