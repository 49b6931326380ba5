"""Transactional fast path under load (issue 13): the Procfile's web server and two critical
pools against Postfix's smtp-sink, loaded from this process.

    createdb -h 127.0.0.1 -U postgres notifier_apifast
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/notifier_apifast REDIS_URL=redis://127.0.0.1:6379/11 \
        .venv/bin/python bench/api_load.py --seconds 30 --rate 100 --runs 3

Without DATABASE_URL/REDIS_URL it starts the embedded PostgreSQL and Redis (var/).

Each run has two phases, each followed by a bounded wait for the critical queue to drain:
- closed loop: `--connections` keep-alive connections POST OTPs (priority critical) back to back
  for `--seconds`;
- open loop: `--rate` requests/s offered for `--seconds` on a schedule fixed in advance; a
  request's latency counts from its intended send time, so a slow server cannot slow the load
  down and hide its own queueing (no coordinated omission).

Printed per phase: accepted req/s, errors, accept latency p50/p99/max, accept-to-ESP p50/p99
(the API's response to the sink's dump file mtime), lost (accepted, not SENT after the drain)
and duplicates (one message id dumped twice by the sink), and CPU ms per message: the web tree,
each critical pool's tree, PostgreSQL backends serving each of them (matched by client port;
TCP only), and the whole postmaster tree (with reaped backends: children_user/children_system;
on a shared server it includes other databases' load). Medians over `--runs` at the end.
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
from bench.esps import SmtpSink, ledger_counts
from testkit.ports import free_port
from testkit.processes import ManagedProcess, procfile_process

PATH = "/api/v1/messages"


# --- load ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the load saw: accepted message ids with their response epoch, latencies, errors."""

    accepted: dict[int, float] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, status: int, payload: bytes, latency_s: float) -> None:
        with self.lock:
            self.latencies_ms.append(latency_s * 1000)
            if status == 202:
                self.accepted[json.loads(payload)["id"]] = time.time()
            else:
                self.errors[f"HTTP {status}: {payload[:120]!r}"] += 1

    def failed(self, exc: Exception) -> None:
        with self.lock:
            self.errors[type(exc).__name__] += 1


class Poster:
    """One keep-alive HTTP/1.1 connection POSTing OTPs (http.client: light on the GIL)."""

    def __init__(self, port: int, key: str, tag: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Api-Key {key}", "Content-Type": "application/json"}
        self.tag = tag
        self.sent = 0

    def post(self, outcome: Outcome, started: float) -> None:
        """One request; latency counts from `started` (perf_counter), its intended send time."""
        self.sent += 1
        body = json.dumps({"to": f"otp-{self.tag}-{self.sent}@example.com", "template": "bench-otp",
                           "priority": "critical", "context": {"code": f"{self.sent:06d}"}})
        try:
            self.conn.request("POST", PATH, body, self.headers)
            response = self.conn.getresponse()
            payload = response.read()
        except (http.client.HTTPException, OSError) as exc:
            self.conn.close()  # reconnects on the next request
            outcome.failed(exc)
            return
        outcome.record(response.status, payload, time.perf_counter() - started)

    def close(self) -> None:
        self.conn.close()


def _run_threads(targets: list) -> None:
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def closed_loop(port: int, key: str, connections: int, seconds: float) -> Outcome:
    outcome = Outcome()
    run_id = uuid.uuid4().hex[:6]
    deadline = time.perf_counter() + seconds

    def client(n: int) -> None:
        poster = Poster(port, key, f"c{run_id}-{n}")
        while time.perf_counter() < deadline:
            poster.post(outcome, time.perf_counter())
        poster.close()

    started = time.perf_counter()
    _run_threads([lambda n=n: client(n) for n in range(connections)])
    outcome.seconds = time.perf_counter() - started
    return outcome


def open_loop(port: int, key: str, rate: float, seconds: float, connections: int) -> Outcome:
    """Request i is due at t0 + i/rate; connection k sends the requests i = k (mod connections),
    each at its due time or, when late, at once (its latency includes the lateness)."""
    outcome = Outcome()
    run_id = uuid.uuid4().hex[:6]
    total = int(rate * seconds)
    t0 = time.perf_counter() + 0.2

    def client(k: int) -> None:
        poster = Poster(port, key, f"o{run_id}-{k}")
        for i in range(k, total, connections):
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            poster.post(outcome, due)
        poster.close()

    _run_threads([lambda k=k: client(k) for k in range(connections)])
    outcome.seconds = time.perf_counter() - t0
    return outcome


# --- CPU ----------------------------------------------------------------------------------------


class PostgresCpu:
    """CPU of the PostgreSQL backends serving each of our process trees (sampled each second,
    matched by the client's TCP port), and of the whole postmaster tree."""

    def __init__(self, trees: dict[str, ManagedProcess]) -> None:
        from django.db import connection

        self.trees = trees
        self.connection = connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), current_database()")
            own_pid, self.database = cursor.fetchone()
        self.own_pid = own_pid
        self.postmaster = psutil.Process(own_pid).ppid()
        self.backends: dict[int, tuple[str, float]] = {}  # pid -> (role, last cpu seconds)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PostgresCpu:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from django.db import DatabaseError

        while not self._stop.wait(1.0):
            try:
                self.sample()
            except (psutil.Error, DatabaseError) as exc:  # a hiccup must not end the benchmark
                print(f"postgres sampler: {exc}", file=sys.stderr)
        self.connection.close()  # this thread's own connection

    def _client_ports(self) -> dict[int, str]:
        ports = {}
        for role, process in self.trees.items():
            for proc in harness.process_tree(process):
                try:
                    for conn in proc.net_connections(kind="tcp"):
                        if conn.raddr:
                            ports[conn.laddr.port] = role
                except psutil.Error:
                    pass
        return ports

    def sample(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT pid, client_port FROM pg_stat_activity WHERE datname = %s "
                           "AND pid <> pg_backend_pid()", [self.database])
            rows = cursor.fetchall()
        ports = self._client_ports()
        with self._lock:
            for pid, port in rows:
                role = ports.get(port) or self.backends.get(pid, ("other", 0.0))[0]
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.backends[pid] = (role, sum(psutil.Process(pid).cpu_times()[:2]))

    def by_role(self) -> dict[str, float]:
        totals: Counter = Counter()
        with self._lock:
            for role, seconds in self.backends.values():
                totals[role] += seconds
        return dict(totals)

    def postmaster_tree(self) -> float:
        return harness.tree_cpu_seconds(self.postmaster, reaped=True)


@dataclass
class CpuSnapshot:
    trees: dict[str, float]
    postgres: dict[str, float]
    postmaster: float


def cpu_snapshot(trees: dict[str, ManagedProcess], postgres: PostgresCpu) -> CpuSnapshot:
    postgres.sample()
    trees_cpu = {role: harness.tree_cpu_seconds(process.process.pid) for role, process in trees.items()}
    return CpuSnapshot(trees_cpu, postgres.by_role(), postgres.postmaster_tree())


# --- one phase ----------------------------------------------------------------------------------


def drain(ids: list[int], seconds: float) -> Counter:
    """Wait (at most `seconds`) until no accepted message is QUEUED or SENDING; their statuses."""
    from django.db.models import Count

    from delivery.models import EmailMessage

    deadline = time.monotonic() + seconds
    while True:
        statuses: Counter = Counter()
        for start in range(0, len(ids), 5000):
            rows = (EmailMessage.objects.filter(pk__in=ids[start:start + 5000]).values("status")
                    .annotate(n=Count("id")).values_list("status", "n"))
            statuses.update(dict(rows))
        if not (statuses["QUEUED"] + statuses["SENDING"]) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.5)


def phase_figures(outcome: Outcome, statuses: Counter, sink: SmtpSink, before: CpuSnapshot,
                  after: CpuSnapshot) -> dict[str, float]:
    entries, _ = sink.read()
    accepted = outcome.accepted
    to_esp = [(at - accepted[int(mid)]) * 1000 for mid, at in entries if int(mid) in accepted]
    _, duplicates = ledger_counts([(mid, at) for mid, at in entries if int(mid) in accepted])
    n = max(1, len(accepted))
    figures = {
        "accepted_per_s": len(accepted) / outcome.seconds,
        "accepted": len(accepted),
        "errors": sum(outcome.errors.values()),
        "accept_p50_ms": harness.percentile(outcome.latencies_ms, 0.5),
        "accept_p99_ms": harness.percentile(outcome.latencies_ms, 0.99),
        "accept_max_ms": max(outcome.latencies_ms),
        "to_esp_p50_ms": harness.percentile(to_esp, 0.5) if to_esp else float("nan"),
        "to_esp_p99_ms": harness.percentile(to_esp, 0.99) if to_esp else float("nan"),
        "sent": statuses.get("SENT", 0),
        "lost": len(accepted) - statuses.get("SENT", 0),
        "duplicates": duplicates,
    }
    for role in after.trees:
        figures[f"cpu_{role}_ms"] = (after.trees[role] - before.trees[role]) * 1000 / n
    for role in {*after.postgres} - {"other"}:
        delta = after.postgres[role] - before.postgres.get(role, 0.0)
        figures[f"cpu_pg[{role}]_ms"] = delta * 1000 / n
    pools = [k for k in figures if k.startswith("cpu_critical")]
    figures["cpu_critical_pools_ms"] = sum(figures[k] for k in pools)
    ours = [k for k in figures if k.startswith("cpu_pg[")]
    figures["cpu_pg_ours_ms"] = sum(figures[k] for k in ours)
    figures["cpu_pg_postmaster_tree_ms"] = (after.postmaster - before.postmaster) * 1000 / n
    return figures


def run_phase(name: str, load, trees: dict[str, ManagedProcess], postgres: PostgresCpu,
              sink: SmtpSink, drain_seconds: float) -> dict[str, float]:
    before = cpu_snapshot(trees, postgres)
    outcome = load()
    web_after = harness.tree_cpu_seconds(trees["web"].process.pid)
    statuses = drain(sorted(outcome.accepted), drain_seconds)
    after = cpu_snapshot(trees, postgres)
    after.trees["web"] = web_after  # the web tree's figure is the load's, not the drain's idle
    figures = phase_figures(outcome, statuses, sink, before, after)
    figures["loadavg_1m"] = os.getloadavg()[0]
    if outcome.errors:
        print(f"  {name} errors: {dict(outcome.errors.most_common(3))}")
    if figures["lost"]:
        print(f"  {name} not SENT after the drain: {dict(statuses)}")
    return figures


def print_figures(name: str, figures: dict[str, float], decimals: int = 1) -> None:
    print(f"{name}: " + "  ".join(f"{k}={v:.{decimals}f}" if isinstance(v, float) else f"{k}={v}"
                                  for k, v in figures.items()), flush=True)


# --- processes ----------------------------------------------------------------------------------


def start_processes(env: dict[str, str], logs: Path, port: int) -> dict[str, ManagedProcess]:
    """The Procfile's web, worker-p0 and worker-p0b, each run from its Procfile line."""
    procs = {"web": harness.web(env, logs, port),
             "critical_a": procfile_process("worker-p0", env, logs),
             "critical_b": procfile_process("worker-p0b", env, logs)}
    for process in procs.values():
        process.start()
    harness.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
    for role in ("critical_a", "critical_b"):
        procs[role].wait_for_log("ready.", timeout=60)
    return procs


def vacuum_ledger() -> None:
    """Every run leaves four dead row versions per message; without autovacuum (this machine's
    PostgreSQL runs with it off) each run would pay for every earlier run's in the indexes."""
    from django.db import connection

    from delivery.models import DeliveryAttempt, EmailMessage

    with connection.cursor() as cursor:
        for model in (EmailMessage, DeliveryAttempt):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")


def stop_everything(procs: dict[str, ManagedProcess], sink: SmtpSink, started: list) -> None:
    """Stop what a load benchmark started: its processes, the sink, the broker's leftovers,
    the embedded servers."""
    for process in procs.values():
        process.stop(timeout=15)
    sink.stop()
    if procs:
        harness.manage("shell", "-c", "from notifier.celery import app; app.control.purge()",
                       check=False)
    for server in started:
        server.stop()


def _embedded_services() -> list:
    """The embedded PostgreSQL and Redis (var/) when DATABASE_URL or REDIS_URL is unset."""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return []
    from devtools.embedded import embedded_postgres, embedded_redis

    servers = (embedded_postgres(harness.ROOT / "var"), embedded_redis(harness.ROOT / "var"))
    return [server for server in servers if server.start()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each load phase")
    parser.add_argument("--connections", type=int, default=16, help="closed-loop connections")
    parser.add_argument("--rate", type=float, default=100.0, help="open-loop requests/s offered")
    parser.add_argument("--open-connections", type=int, default=64,
                        help="open-loop connections (enough that none is the bottleneck)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--phases", default="closed,open")
    parser.add_argument("--drain-seconds", type=float, default=60.0)
    args = parser.parse_args()
    started = _embedded_services()
    procs: dict[str, ManagedProcess] = {}
    sink = SmtpSink(free_port(), harness.log_dir(harness.LOG_DIR / "api_load"))
    try:
        harness.django_setup(own_redis_prefix=True)
        vacuum_ledger()
        key = harness.otp_api_key("bench-api-load", "--rate", "1000000/min")
        sink.start()
        env = harness.process_env(NOTIFIER_PROVIDERS="smtp", SMTP_HOST="127.0.0.1",
                                  SMTP_PORT=str(sink.port), PYTHONUNBUFFERED="1")
        port = free_port()
        procs = start_processes(env, sink.logs, port)
        postgres = PostgresCpu(procs).start()
        warm = closed_loop(port, key, args.connections, 3.0)  # every web worker and pool warm
        drain(sorted(warm.accepted), args.drain_seconds)
        sink.read()
        loads = {"closed": lambda: closed_loop(port, key, args.connections, args.seconds),
                 "open": lambda: open_loop(port, key, args.rate, args.seconds, args.open_connections)}
        results: dict[str, list[dict[str, float]]] = {}
        for run in range(1, args.runs + 1):
            for name in args.phases.split(","):
                figures = run_phase(name, loads[name], procs, postgres, sink, args.drain_seconds)
                results.setdefault(name, []).append(figures)
                print_figures(f"run {run} {name}", figures)
        postgres.stop()
        for name, runs in results.items():
            print_figures(f"median {name} ({len(runs)} runs)",
                   {k: statistics.median(r[k] for r in runs) for k in runs[0]})
    finally:
        stop_everything(procs, sink, started)


if __name__ == "__main__":
    main()
