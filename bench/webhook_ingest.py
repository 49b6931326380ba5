"""Benchmark: webhook ingest, end to end (verify + store + process), with real processes.

    DATABASE_URL=postgres://... REDIS_URL=redis://... python bench/webhook_ingest.py \
        [--events 100000] [--batch 1000] [--provider sendgrid|mailgun] [--clients 4]

Starts granian (the web process of the Procfile) and the ops worker (which consumes the
`email-webhook` queue), creates sent messages to report on, then POSTs signed webhooks over HTTP
(SendGrid: JSON arrays of `--batch` events, as SendGrid batches them; Mailgun: one event per
request, as Mailgun sends them) and waits until every stored delivery is processed. Prints
ingest (verify + store, HTTP 200) and end-to-end (through processing) events per second.
Keys are generated for the run; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.pg_cpu import BackendCpu

harness.django_setup()

from django.db import connection  # noqa: E402

from bench.owner import bench_client  # noqa: E402
from campaigns.models import Campaign  # noqa: E402
from delivery.models import EmailMessage  # noqa: E402
from delivery.providers.base import MESSAGE_ID_KEY  # noqa: E402
from feedback.models import WebhookDelivery  # noqa: E402
from templates.services import template_create  # noqa: E402
from testkit.ports import free_port  # noqa: E402
from testkit.webhook_signing import SendGridTestSigner, mailgun_body  # noqa: E402

KINDS = ("delivered", "open", "click", "bounce", "unsubscribe")
WEIGHTS = (0.55, 0.25, 0.12, 0.05, 0.03)
MG_KINDS = {"delivered": "delivered", "open": "opened", "click": "clicked", "bounce": "failed",
            "unsubscribe": "unsubscribed"}


def make_messages(count: int) -> tuple[Campaign, list[tuple[int, str]]]:
    run = uuid.uuid4().hex[:8]
    version = template_create(client=bench_client(), name=f"bench-{run}", subject="Hi {{ name }}",
                              html_body="<p>Hi</p>")
    campaign = Campaign.objects.create(name=f"bench-{run}", template_version=version, status="SENDING")
    rows = [
        EmailMessage(campaign=campaign, recipient=f"b{run}-{i}@example.com", template_version=version,
                     priority=3, idempotency_key=f"bench:{run}:{i}", status="SENT", provider="sendgrid",
                     provider_message_id=f"sg-{run}-{i}")
        for i in range(count)
    ]
    created = EmailMessage.objects.bulk_create(rows, batch_size=5000)
    return campaign, [(m.id, m.recipient) for m in created]


def sendgrid_bodies(messages, events: int, batch: int, signer,
                    kinds: tuple[str, ...] = KINDS) -> list[tuple[bytes, dict[str, str]]]:
    rng = random.Random(42)
    now = int(time.time())
    items = []
    weights = WEIGHTS if kinds == KINDS else None
    for n in range(events):
        message_id, recipient = rng.choice(messages)
        kind = rng.choices(kinds, weights)[0]
        items.append({"email": recipient, "timestamp": now, "event": kind, "sg_event_id": uuid.uuid4().hex,
                      "sg_message_id": f"x{n}.filter0001", MESSAGE_ID_KEY: str(message_id),
                      **({"type": "bounce"} if kind == "bounce" else {})})
    bodies = []
    for start in range(0, events, batch):
        body = json.dumps(items[start:start + batch]).encode()
        bodies.append((body, {"Content-Type": "application/json", **signer.sign(body)}))
    return bodies


def mailgun_bodies(messages, events: int, key: str) -> list[tuple[bytes, dict[str, str]]]:
    rng = random.Random(42)
    bodies = []
    for _ in range(events):
        message_id, recipient = rng.choice(messages)
        kind = MG_KINDS[rng.choices(KINDS, WEIGHTS)[0]]
        data = {"id": uuid.uuid4().hex, "timestamp": time.time(), "event": kind, "recipient": recipient,
                "severity": "permanent", "user-variables": {MESSAGE_ID_KEY: str(message_id)}}
        bodies.append((mailgun_body(key, data), {"Content-Type": "application/json"}))
    return bodies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--provider", choices=("sendgrid", "mailgun"), default="sendgrid")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="ops worker processes")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="SendGrid event kinds, comma-separated (the 1M day posts 'processed')")
    args = parser.parse_args()

    signer, mg_key = SendGridTestSigner.generate(), uuid.uuid4().hex
    _, messages = make_messages(args.messages)
    if args.provider == "sendgrid":
        bodies = sendgrid_bodies(messages, args.events, args.batch, signer, tuple(args.kinds.split(",")))
    else:
        bodies = mailgun_bodies(messages, args.events, mg_key)
    port = free_port()
    env = harness.process_env(
        FEEDBACK_SENDGRID_PUBLIC_KEY=signer.public_key_b64, FEEDBACK_MAILGUN_SIGNING_KEY=mg_key,
        NOTIFIER_TASK_EVENTS="false", NOTIFIER_LOG_LEVEL="WARNING",
        NOTIFIER_WORKER_OPS_CONCURRENCY=str(args.workers))
    logs = harness.log_dir(harness.LOG_DIR / "webhook_ingest")
    web, worker = harness.web(env, logs, port).start(), harness.worker("ops", env, logs).start()
    try:
        harness.wait_http(f"http://127.0.0.1:{port}/healthz")
        time.sleep(3)  # worker boot ("ready." is an INFO line: not logged at WARNING)
        first_id = (WebhookDelivery.objects.order_by("-id").values_list("id", flat=True).first() or 0)
        url = f"http://127.0.0.1:{port}/webhooks/{args.provider}/"
        local = threading.local()  # one keep-alive session per client thread

        def post(i: int) -> int:
            body, headers = bodies[i]
            if not hasattr(local, "session"):
                local.session = requests.Session()
            return local.session.post(url, data=body, headers=headers, timeout=60).status_code

        cpu = ProcessCpu({"web": web, "ops": worker}, connection.settings_dict["NAME"]).start()
        started = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            codes = list(pool.map(post, range(len(bodies))))
        ingested = time.monotonic() - started
        bad = [c for c in codes if c != 200]
        if bad:
            raise SystemExit(f"{len(bad)} requests refused: {set(bad)}")
        mine = WebhookDelivery.objects.filter(id__gt=first_id)
        deadline = time.monotonic() + 900
        while mine.filter(status="pending").exists():
            if time.monotonic() > deadline:
                raise SystemExit("processing did not finish in 15 min")
            time.sleep(0.1)
        total = time.monotonic() - started
        spent = cpu.stop()
    finally:
        for process in (web, worker):
            process.stop(timeout=30)
    print(f"provider={args.provider} events={args.events} requests={len(bodies)} clients={args.clients}")
    print(f"ingest (verify + store, 2xx): {ingested:.2f} s = {args.events / ingested:,.0f} events/s")
    print(f"end to end (+ process):       {total:.2f} s = {args.events / total:,.0f} events/s")
    print("CPU per event (ms): " + ", ".join(
        f"{name} {seconds * 1000 / args.events:.3f}" for name, seconds in spent.items())
        + f", total {sum(spent.values()) * 1000 / args.events:.3f}; load {harness.loadavg()}")


class ProcessCpu:
    """CPU seconds spent by the web and ops process trees and this database's PostgreSQL
    backends between start() and stop(), from /proc (children reaped included)."""

    def __init__(self, processes: dict, database: str):
        self.processes = processes
        self.pg = BackendCpu(database)
        self.before: dict[str, float] = {}

    def _trees(self) -> dict[str, float]:
        return {name: harness.tree_cpu_seconds(p.process.pid, reaped=True)
                for name, p in self.processes.items()}

    def start(self) -> ProcessCpu:
        self.pg.__enter__()
        self.before = self._trees()
        return self

    def stop(self) -> dict[str, float]:
        after = self._trees()
        self.pg.__exit__(None, None, None)
        return {**{n: after[n] - self.before[n] for n in after}, "postgres": self.pg.seconds}


if __name__ == "__main__":
    main()
