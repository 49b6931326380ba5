"""Batch send under load (issue 29): POST /api/v1/messages/batch through the Procfile's web
server, the Procfile's P2 pool sending to Postfix's smtp-sink.

    .venv/bin/python bench/batch_load.py --batch 500 --connections 4 --batches 10 --runs 3

Without DATABASE_URL/REDIS_URL it starts the embedded PostgreSQL and Redis (var/). Each run:
`--connections` keep-alive connections each POST `--batches` batches of `--batch` messages
(priority normal, as receipts would be) back to back, then a bounded wait for every accepted
message to leave QUEUED/SENDING. Printed per run: accepted messages/s (accepted messages over
the load's wall time), batch latency p50/p99, web CPU ms per message (the web process tree from
/proc, over the load only), the PostgreSQL server's tree per message (over the load), lost (accepted, not SENT
after the drain), duplicates (a message id dumped twice by the sink) and the load average;
medians over `--runs` at the end. `--hold-pool` pauses the P2 pool during the load (it sends
the same messages afterwards), so the figure is the accept side's without the sending beside
it on the same cores. The target: >= 5,000 messages/s, <= 1 ms of web CPU each.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.api_load import (
    PostgresCpu,
    _embedded_services,
    cpu_snapshot,
    drain,
    print_figures,
    stop_everything,
    vacuum_ledger,
)
from bench.esps import SmtpSink, ledger_counts
from testkit.ports import free_port
from testkit.processes import ManagedProcess, procfile_process

PATH = "/api/v1/messages/batch"


@dataclass
class Outcome:
    accepted: set[int] = field(default_factory=set)
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, status: int, payload: bytes, latency_s: float) -> None:
        with self.lock:
            self.latencies_ms.append(latency_s * 1000)
            if status in (202, 207):
                results = json.loads(payload)["results"]
                self.accepted.update(r["id"] for r in results if "id" in r)
                refused = sum(1 for r in results if "id" not in r)
                if refused:
                    self.errors["refused items"] += refused
            else:
                self.errors[f"HTTP {status}: {payload[:120]!r}"] += 1


def batch_body(tag: str, size: int) -> str:
    return json.dumps({"messages": [
        {"to": f"r-{tag}-{i}@example.com", "template": "bench-otp", "priority": "normal",
         "context": {"code": f"{i:06d}"}} for i in range(size)]})


def load(port: int, key: str, connections: int, batches: int, size: int) -> Outcome:
    """Each connection POSTs `batches` batches back to back (bodies built before the clock starts)."""
    outcome = Outcome()
    run_id = uuid.uuid4().hex[:6]
    bodies = [[batch_body(f"{run_id}-{c}-{b}", size) for b in range(batches)] for c in range(connections)]
    headers = {"Authorization": f"Api-Key {key}", "Content-Type": "application/json"}

    def client(mine: list[str]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for body in mine:
            started = time.perf_counter()
            try:
                conn.request("POST", PATH, body, headers)
                response = conn.getresponse()
                outcome.record(response.status, response.read(), time.perf_counter() - started)
            except (http.client.HTTPException, OSError) as exc:
                conn.close()
                with outcome.lock:
                    outcome.errors[type(exc).__name__] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(mine,), daemon=True) for mine in bodies]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcome.seconds = time.perf_counter() - started
    return outcome


def _pool_signal(process: ManagedProcess, *, stop: bool) -> None:
    """SIGSTOP/SIGCONT the pool's whole tree: its tasks wait (prefetched or in the queue), none
    is lost, and the load runs without the pool's sending on the same two cores."""
    for proc in harness.process_tree(process):
        with contextlib.suppress(psutil.NoSuchProcess):
            if stop:
                proc.suspend()
            else:
                proc.resume()


def run_once(args: argparse.Namespace, port: int, key: str, procs: dict[str, ManagedProcess],
             postgres: PostgresCpu, sink: SmtpSink) -> dict[str, float]:
    before = cpu_snapshot(procs, postgres)
    if args.hold_pool:
        _pool_signal(procs["normal"], stop=True)
    try:
        outcome = load(port, key, args.connections, args.batches, args.batch)
    finally:
        web_after = cpu_snapshot(procs, postgres)  # the web figures are the load's, not the drain's
        if args.hold_pool:
            _pool_signal(procs["normal"], stop=False)
    statuses = drain(sorted(outcome.accepted), args.drain_seconds)
    entries, _ = sink.read()
    ours = [(mid, at) for mid, at in entries if int(mid) in outcome.accepted]
    distinct, duplicates = ledger_counts(ours)
    n = max(1, len(outcome.accepted))
    if outcome.errors:
        print(f"  errors: {dict(outcome.errors.most_common(3))}")
    return {
        "accepted_per_s": len(outcome.accepted) / outcome.seconds,
        "accepted": len(outcome.accepted),
        "batch_p50_ms": harness.percentile(outcome.latencies_ms, 0.5),
        "batch_p99_ms": harness.percentile(outcome.latencies_ms, 0.99),
        "cpu_web_ms": (web_after.trees["web"] - before.trees["web"]) * 1000 / n,
        # The embedded PostgreSQL serves only this run (a DATABASE_URL server may serve others).
        "cpu_pg_tree_ms": (web_after.postmaster - before.postmaster) * 1000 / n,
        "sent": statuses.get("SENT", 0),
        "lost": len(outcome.accepted) - statuses.get("SENT", 0),
        "at_sink": distinct,
        "duplicates": duplicates,
        "loadavg_1m": os.getloadavg()[0],
    }


def start_processes(env: dict[str, str], logs: Path, port: int,
                    web_workers: int) -> dict[str, ManagedProcess]:
    """The Procfile's web line and its P2 pool (worker-p2)."""
    procs = {"web": harness.web(env, logs, port, workers=web_workers),
             "normal": procfile_process("worker-p2", env, logs)}
    for process in procs.values():
        process.start()
    harness.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
    procs["normal"].wait_for_log("ready.", timeout=60)
    return procs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=500, help="messages per request")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--batches", type=int, default=10, help="requests per connection per run")
    parser.add_argument("--web-workers", type=int, default=2, help="the Procfile's WEB_CONCURRENCY")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--drain-seconds", type=float, default=180.0)
    parser.add_argument("--hold-pool", action="store_true",
                        help="pause the P2 pool during the load (the accept side alone), then drain")
    args = parser.parse_args()
    started = _embedded_services()
    procs: dict[str, ManagedProcess] = {}
    sink = SmtpSink(free_port(), harness.log_dir(harness.LOG_DIR / "batch_load"))
    try:
        harness.django_setup(own_redis_prefix=True)
        key = harness.otp_api_key("bench-batch-load", "--rate", "1000000/min")  # migrates first
        vacuum_ledger()
        sink.start()
        env = harness.process_env(NOTIFIER_PROVIDERS="smtp", SMTP_HOST="127.0.0.1",
                                  SMTP_PORT=str(sink.port), PYTHONUNBUFFERED="1")
        port = free_port()
        procs = start_processes(env, sink.logs, port, args.web_workers)
        postgres = PostgresCpu(procs).start()
        warm = load(port, key, args.connections, 1, args.batch)  # every web worker warm
        drain(sorted(warm.accepted), args.drain_seconds)
        sink.read()
        print(f"load average before: {harness.loadavg()}", flush=True)
        runs = []
        for run in range(1, args.runs + 1):
            runs.append(run_once(args, port, key, procs, postgres, sink))
            print_figures(f"run {run}", runs[-1], decimals=2)
        postgres.stop()
        medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print_figures(f"median ({len(runs)} runs)", medians, decimals=2)
        print(f"load average after: {harness.loadavg()}", flush=True)
    finally:
        stop_everything(procs, sink, started)


if __name__ == "__main__":
    main()
