"""Benchmark: a callback receiver answers 500 for 10 minutes while OTPs stream, then recovers.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/notifier_outage REDIS_URL=redis://127.0.0.1:6379/9 \
        .venv/bin/python bench/callbacks_outage.py --fail-seconds 600 --rate 20

The whole path is real: the Procfile's web server (granian) takes `POST /api/v1/messages` at
`--rate` per second (Poisson arrivals) with priority critical; the P0 pool sends to Postfix's
smtp-sink; the event writers record `message.accepted` and `message.sent` for the one endpoint;
`manage.py run_scheduler` sweeps the callbacks due; the `callbacks` pool posts them to a
receiver on 127.0.0.1 (a thread of this process) that answers 500 for `--fail-seconds`, then
200. Retries follow the production defaults (backoff from 5 s, doubling, capped at 5 min with
jitter) unless NOTIFIER_CALLBACKS_* are set.

Prints: P0 latency (created_at -> sent_at of the rows) during the outage and after it, the API's
accept latency, the events expected (the service's rows in the event log) against the distinct
ids the receiver took with a 2xx (lost) and the ids it took more than once (duplicates, before
the receiver's deduplication by id), failed POSTs, the time from recovery to the last event,
the callbacks pool's CPU per event, and the load average.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.esps import SmtpSink
from testkit.callback_receiver import CallbackReceiver
from testkit.ports import free_port
from testkit.processes import ManagedProcess, callbacks_worker

EVENT_TYPES = ["message.accepted", "message.sent"]


@dataclass
class Load:
    """What the P0 stream did: (message id, wall time posted) per accepted request."""

    accepted: list[tuple[int, float]] = field(default_factory=list)
    accept_ms: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)


def _stream(url: str, key: str, rate: float, seconds: float, load: Load) -> None:
    """POST an OTP at Poisson arrivals of `rate`/s for `seconds` (bounded by time and count)."""
    session = requests.Session()
    session.headers["Authorization"] = f"Api-Key {key}"
    deadline = time.monotonic() + seconds
    next_at = time.monotonic()
    for n in range(int(rate * seconds * 2) + 10):
        next_at += random.expovariate(rate)
        if next_at >= deadline:
            return
        time.sleep(max(0.0, next_at - time.monotonic()))
        body = {"to": f"outage{n}@example.com", "template": "bench-otp", "priority": "critical",
                "context": {"code": str(n)}, "metadata": {"n": str(n)}}
        started = time.perf_counter()
        try:
            response = session.post(url, json=body, timeout=10)
        except requests.RequestException as error:
            load.errors[type(error).__name__] += 1
            continue
        load.accept_ms.append((time.perf_counter() - started) * 1000)
        if response.status_code == 202:
            load.accepted.append((response.json()["id"], time.time()))
        else:
            load.errors[str(response.status_code)] += 1


def _processes(env: dict[str, str], port: int) -> list[ManagedProcess]:
    logs = harness.log_dir(harness.LOG_DIR / "callbacks_outage")
    return [harness.web(env, logs, port), harness.worker("critical", env, logs),
            callbacks_worker(env, logs, concurrency=4), harness.scheduler(env, logs)]


def _p0_latencies(ids: list[int], since: float, until: float) -> list[float]:
    """created_at -> sent_at (s) of the rows created in [since, until) (epoch seconds)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM sent_at - created_at) FROM delivery_emailmessage"
                       " WHERE id = ANY(%s) AND sent_at IS NOT NULL"
                       " AND created_at >= to_timestamp(%s) AND created_at < to_timestamp(%s)",
                       [ids, since, until])
        return [float(row[0]) for row in cursor.fetchall()]


def _unsent(ids: list[int]) -> int:
    from delivery.models import EmailMessage

    return EmailMessage.objects.filter(id__in=ids, sent_at__isnull=True).count()


def _expected_events(service_id: str) -> set[int]:
    from eventlog.models import ServiceEvent

    return set(ServiceEvent.objects.filter(service_id=service_id, type__in=EVENT_TYPES)
               .values_list("id", flat=True))


def _figures(latencies: list[float]) -> str:
    if not latencies:
        return "n=0"
    q = harness.percentile
    return (f"n={len(latencies)} p50={q(latencies, 0.5):.3f}s p99={q(latencies, 0.99):.3f}s"
            f" max={max(latencies):.3f}s")


def _wait_caught_up(receiver: CallbackReceiver, service_id: str, ids: list[int], timeout: float) -> float:
    """Until every row is sent and the receiver holds every expected event; the time it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not _unsent(ids) and _expected_events(service_id) <= set(receiver.accepted_event_ids()):
            break
        time.sleep(1.0)
    return time.monotonic() - started


def run(args: argparse.Namespace) -> None:
    from callbacks.services.endpoints import endpoint_create
    from clients.selectors import service_for_key

    key = harness.otp_api_key(f"bench-outage-{random.randrange(10**6)}", "--rate", "1000000/min")
    service = service_for_key(key)
    receiver = CallbackReceiver().start()
    endpoint_create(service_id=service.pk, url=receiver.url, event_types=EVENT_TYPES)
    sink_port, web_port = free_port(), free_port()
    sink = SmtpSink(sink_port, harness.log_dir(harness.LOG_DIR / "callbacks_outage_sink")).start()
    env = harness.process_env(NOTIFIER_CALLBACKS_ALLOW_LOOPBACK="true", SMTP_HOST="127.0.0.1",
                              SMTP_PORT=str(sink_port), PYTHONUNBUFFERED="1")
    processes = _processes(env, web_port)
    load = Load()
    try:
        for process in processes:
            process.start()
        harness.wait_http(f"http://127.0.0.1:{web_port}/healthz", timeout=60)
        for process in processes[1:3]:
            process.wait_for_log("ready.", timeout=120)
        pool_cpu = harness.tree_cpu_seconds(processes[2].process.pid, reaped=True)
        receiver.status = 500
        outage_start = time.time()
        threading.Timer(args.fail_seconds, lambda: setattr(receiver, "status", 200)).start()
        _stream(f"http://127.0.0.1:{web_port}/api/v1/messages", key, args.rate,
                args.fail_seconds + args.after_seconds, load)
        recovered = outage_start + args.fail_seconds
        ids = [message_id for message_id, _ in load.accepted]
        catch_up = _wait_caught_up(receiver, service.pk, ids, args.timeout)
        pool_cpu = harness.tree_cpu_seconds(processes[2].process.pid, reaped=True) - pool_cpu
    finally:
        for process in reversed(processes):
            process.stop()
        sink.stop()
        receiver.stop()
    _report(args, load, receiver, service.pk, (outage_start, recovered), catch_up, pool_cpu)


def _report(args: argparse.Namespace, load: Load, receiver: CallbackReceiver, service_id: str,
            outage: tuple[float, float], catch_up: float, pool_cpu: float) -> None:
    ids = [message_id for message_id, _ in load.accepted]
    expected = _expected_events(service_id)
    taken = Counter(receiver.accepted_event_ids())
    failed_posts = sum(1 for r in receiver.requests() if r.status >= 300)
    last_ok = max((r.at for r in receiver.requests() if r.status < 300), default=0.0)
    first_ok = min((r.at for r in receiver.requests() if r.status < 300), default=0.0)
    print(f"fail_seconds={args.fail_seconds} rate={args.rate}/s accepted={len(ids)}"
          f" api_errors={dict(load.errors)} unsent={_unsent(ids)} load={harness.loadavg()}")
    print(f"P0 created->sent during the outage: {_figures(_p0_latencies(ids, *outage))}")
    print(f"P0 created->sent after it:          {_figures(_p0_latencies(ids, outage[1], time.time()))}")
    print(f"API accept: {_figures([ms / 1000 for ms in load.accept_ms])}")
    print(f"events expected={len(expected)} taken_distinct={len(set(taken) & expected)}"
          f" lost={len(expected - set(taken))} duplicates={sum(n - 1 for n in taken.values())}"
          f" unexpected={len(set(taken) - expected)} posts_failed={failed_posts}"
          f" posts_ok={sum(1 for r in receiver.requests() if r.status < 300)}")
    print(f"first 2xx -> last 2xx {last_ok - first_ok:.1f}s; caught up {catch_up:.1f}s after the load ended;"
          f" callbacks pool CPU {pool_cpu:.1f}s = {pool_cpu / max(len(expected), 1) * 1e6:.0f} us/event")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fail-seconds", type=float, default=600.0)
    parser.add_argument("--after-seconds", type=float, default=60.0, help="load after recovery")
    parser.add_argument("--rate", type=float, default=20.0, help="P0 requests per second")
    parser.add_argument("--timeout", type=float, default=900.0, help="catch-up bound after the load")
    args = parser.parse_args()
    harness.django_setup(own_redis_prefix=True)
    run(args)


if __name__ == "__main__":
    main()
