"""Benchmark: status callbacks delivered to a local receiver, events/s and CPU per event.

    python bench/callbacks.py --events 20000 --batch 100            # the embedded servers (var/)
    python bench/callbacks.py --events 20000 --fail-seconds 20      # a receiver outage first

Records `--events` events of one service in the event log (one INSERT), registers an endpoint
on a receiver on 127.0.0.1 (a thread of this process, so its CPU is not the pool's), starts the
real `callbacks` pool (`python -m core.worker callbacks`) and plays the scheduler's sweep every
0.5 s until the receiver holds every event. Prints events/s (first publish to last event),
POSTs, the pool's CPU per event (its process tree's user + system from /proc) and our
PostgreSQL backends' (bench/pg_cpu.py), and the lost and duplicate events by id. With
`--fail-seconds` the receiver answers 500 that long, then 200.
Without DATABASE_URL/REDIS_URL it starts the embedded PostgreSQL and Redis (var/) and stops them.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench import harness
from bench.pg_cpu import BackendCpu
from testkit.callback_receiver import CallbackReceiver
from testkit.processes import callbacks_worker

_INSERT = ("INSERT INTO eventlog_serviceevent (service_id, type, message_id, occurred_at, data)"
           " SELECT %s, 'message.delivered', n, now(), jsonb_build_object('idempotency_key', 'order-' || n)"
           " FROM generate_series(1, %s) AS n")


def _embedded_services() -> list:
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return []
    from devtools.embedded import embedded_postgres, embedded_redis

    servers = (embedded_postgres(harness.ROOT / "var"), embedded_redis(harness.ROOT / "var"))
    return [server for server in servers if server.start()]


def _setup(events: int) -> tuple[int, str]:
    from django.db import connection

    from clients.services import service_create

    service, _ = service_create(name=f"bench-callbacks-{uuid.uuid4().hex[:8]}")
    with connection.cursor() as cursor:
        cursor.execute(_INSERT, [service.pk, events])
    return service.pk, connection.settings_dict["NAME"]


def run(args: argparse.Namespace, receiver: CallbackReceiver) -> None:
    from callbacks.services.dispatch import callbacks_dispatch_sweep
    from callbacks.services.endpoints import endpoint_create

    service_id, database = _setup(args.events)
    endpoint = endpoint_create(service_id=service_id, url=receiver.url, event_types=["message.delivered"])
    # The endpoint starts at the log's horizon: move it to the start so it delivers the backlog.
    from callbacks.models import WebhookEndpoint

    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(cursor_txid=0, cursor_id=0)
    env = harness.process_env(NOTIFIER_CALLBACKS_ALLOW_LOOPBACK="true", PYTHONUNBUFFERED="1",
                              NOTIFIER_CALLBACKS_BATCH_EVENTS=str(args.batch),
                              NOTIFIER_CALLBACKS_BACKOFF_SECONDS="1")
    worker = callbacks_worker(env, harness.log_dir(harness.LOG_DIR / "callbacks"), concurrency=args.threads)
    worker.start()
    try:
        worker.wait_for_log("ready.", timeout=120)
        if args.fail_seconds:
            receiver.status = 500
            threading.Timer(args.fail_seconds, lambda: setattr(receiver, "status", 200)).start()
        cpu_before = harness.tree_cpu_seconds(worker.process.pid, reaped=True)
        with BackendCpu(database) as pg:
            started = time.monotonic()
            deadline = started + args.timeout
            while len(set(receiver.accepted_event_ids())) < args.events and time.monotonic() < deadline:
                callbacks_dispatch_sweep()
                time.sleep(0.5)
            elapsed = time.monotonic() - started
        worker_cpu = harness.tree_cpu_seconds(worker.process.pid, reaped=True) - cpu_before
    finally:
        worker.stop()
    accepted = receiver.accepted_event_ids()
    distinct = len(set(accepted))
    ok_posts = sum(1 for r in receiver.requests() if r.status == 200)
    print(f"events={args.events} batch={args.batch} threads={args.threads} fail_seconds={args.fail_seconds}"
          f" elapsed_s={elapsed:.2f} events_per_s={distinct / elapsed:,.0f} posts_2xx={ok_posts}"
          f" posts_total={len(receiver.requests())} lost={args.events - distinct}"
          f" duplicates={len(accepted) - distinct}"
          f" pool_cpu_us_per_event={worker_cpu / max(distinct, 1) * 1e6:.0f}"
          f" pg_cpu_us_per_event={pg.seconds / max(distinct, 1) * 1e6:.0f} load={harness.loadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fail-seconds", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    os.environ["NOTIFIER_CALLBACKS_ALLOW_LOOPBACK"] = "true"
    started = _embedded_services()
    receiver = CallbackReceiver().start()
    try:
        harness.django_setup(own_redis_prefix=True)
        harness.manage("migrate", "--noinput")
        run(args, receiver)
    finally:
        receiver.stop()
        for server in started:
            server.stop()


if __name__ == "__main__":
    main()
