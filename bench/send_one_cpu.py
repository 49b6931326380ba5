"""Benchmark: CPU per transactional message in a real critical pool, and in PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/notifier_p0send REDIS_URL=redis://127.0.0.1:6379/12 \
        python bench/send_one_cpu.py [--messages 1000] [--runs 3] [--variants batch,lean]

For each run and variant, alternately (A/B in the same minutes on a shared machine): starts
Postfix smtp-sink on a free port and one `python -m core.worker critical` pool (`--concurrency`
processes) with the variant's environment, sends a warm-up, then writes `--messages` QUEUED P0
OTP rows (each its own code), publishes one task each (as the API does) and waits until all are
SENT. It prints the CPU time per message of the worker's process tree (utime + stime of every
process, plus the times of reaped children) and of the PostgreSQL backends serving this
database (the bench's own connection excluded), read from /proc through psutil, with the wall
time, the load average, and lost / duplicate counts (accepted attempts per message).

Variants: batch = the batch path for a batch of one (NOTIFIER_SEND_ONE_LEAN=false), lean = the
single-message path (delivery/services/send_one.py); `+events` turns Celery task events on
(NOTIFIER_TASK_EVENTS and NOTIFIER_FAST_POOL_TASK_EVENTS, for Flower), `+tasklog` Celery's per-task INFO lines
(NOTIFIER_LOG_EACH_TASK=true). `old` runs the pool from another checkout (`--old-tree DIR`),
`tree:DIR` from DIR, each with that code's defaults: the A/B against the code before a change.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from bench import harness
from testkit.ports import free_port
from testkit.processes import ManagedProcess

PATHS = {"batch": {"NOTIFIER_SEND_ONE_LEAN": "false"}, "lean": {"NOTIFIER_SEND_ONE_LEAN": "true"}}
FLAGS = {"events": ("NOTIFIER_TASK_EVENTS", "NOTIFIER_FAST_POOL_TASK_EVENTS"),
         "tasklog": ("NOTIFIER_LOG_EACH_TASK",)}


class TreeWorker(ManagedProcess):
    """A critical pool started from another checkout of the code (`--old-tree`)."""

    def __init__(self, tree: Path, env: dict[str, str], logs: Path):
        super().__init__("worker-critical", [harness.PY, "-m", "core.worker", "critical"], env, logs)
        self.tree = tree

    def start(self) -> TreeWorker:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process owns it
        self.process = subprocess.Popen(self.argv, cwd=self.tree, env=self.env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        return self


def variant_env(variant: str) -> dict[str, str]:
    """"lean+events" -> the single-message path with task events on, per-task log lines off;
    "old" -> the `--old-tree` checkout with that code's production defaults (events on)."""
    if variant == "old" or variant.startswith("tree:"):
        return {"NOTIFIER_TASK_EVENTS": "true"}
    path, *flags = variant.split("+")
    return {**PATHS[path], **{name: str(flag in flags).lower()
                              for flag, names in FLAGS.items() for name in names}}


def backend_cpu(pids: set[int]) -> dict[int, float]:
    seconds = {}
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            seconds[pid] = sum(psutil.Process(pid).cpu_times()[:2])
    return seconds


def database_backends() -> set[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        return {row[0] for row in cursor.fetchall()}


def create_rows(version, client, count: int, tag: str) -> list[int]:
    from core.priorities import Priority
    from delivery.models import EmailMessage

    rows = [
        EmailMessage(client=client, recipient=f"user{i}@example.com", context={"code": f"{i:06d}"},
                     template_version=version, priority=Priority.CRITICAL,
                     idempotency_key=f"bench-send-one:{tag}:{i}")
        for i in range(count)
    ]
    return [m.pk for m in EmailMessage.objects.bulk_create(rows)]


def publish(ids: list[int]) -> None:
    from core.priorities import Priority
    from delivery.services.dispatch import messages_enqueue

    for message_id in ids:
        messages_enqueue(message_ids=[message_id], priority=Priority.CRITICAL)


def wait_done(ids: list[int], timeout: float) -> int:
    from delivery.models import EmailMessage

    deadline = time.monotonic() + timeout
    while True:
        done = EmailMessage.objects.filter(id__in=ids).exclude(
            status__in=[EmailMessage.Status.QUEUED, EmailMessage.Status.SENDING]).count()
        if done == len(ids) or time.monotonic() > deadline:
            return done
        time.sleep(0.1)


def counts(ids: list[int]) -> tuple[int, int]:
    """(lost: not SENT, duplicates: accepted attempts beyond one per message)."""
    from django.db.models import Count

    from delivery.models import DeliveryAttempt, EmailMessage

    sent = EmailMessage.objects.filter(id__in=ids, status=EmailMessage.Status.SENT).count()
    accepted = (DeliveryAttempt.objects.filter(message_id__in=ids, outcome="accepted")
                .values("message_id").annotate(n=Count("id")).filter(n__gt=1))
    return len(ids) - sent, sum(row["n"] - 1 for row in accepted)


def run_once(variant: str, args, version, client, logs: Path) -> dict[str, float]:
    port = free_port()
    sink = subprocess.Popen(["/usr/sbin/smtp-sink", "-u", "nobody", f"127.0.0.1:{port}", "1000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = harness.process_env(SMTP_PORT=str(port), NOTIFIER_PROVIDERS="smtp",
                              NOTIFIER_WORKER_P0_CONCURRENCY=str(args.concurrency),
                              NOTIFIER_WORKER_NAME=f"bench-critical-{uuid.uuid4().hex[:6]}@%h",
                              **variant_env(variant))
    if variant == "old" or variant.startswith("tree:"):
        tree = args.old_tree if variant == "old" else variant.removeprefix("tree:")
        worker = TreeWorker(Path(tree), env, logs).start()
    else:
        worker = harness.worker("critical", env, logs).start()
    try:
        worker.wait_for_log("ready", timeout=60)
        tag = uuid.uuid4().hex[:8]
        warm = create_rows(version, client, args.warmup, f"{tag}-warm")
        publish(warm)
        wait_done(warm, 60)
        ids = create_rows(version, client, args.messages, tag)
        backends = database_backends()
        pg_before = backend_cpu(backends)
        worker_before = harness.tree_cpu_seconds(worker.process.pid, reaped=True)
        parent_before = sum(psutil.Process(worker.process.pid).cpu_times()[:2])
        started = time.perf_counter()
        publish(ids)
        done = wait_done(ids, args.timeout)
        wall = time.perf_counter() - started
        worker_cpu = harness.tree_cpu_seconds(worker.process.pid, reaped=True) - worker_before
        parent_cpu = sum(psutil.Process(worker.process.pid).cpu_times()[:2]) - parent_before
        backends |= database_backends()
        pg_after = backend_cpu(backends)
        pg_cpu = sum(pg_after[pid] - pg_before.get(pid, 0.0) for pid in pg_after)
        lost, dup = counts(ids)
    finally:
        worker.stop()
        sink.terminate()
        sink.wait(timeout=10)
    n = len(ids)
    return {"worker_ms": worker_cpu / n * 1e3, "parent_ms": parent_cpu / n * 1e3,
            "pg_ms": pg_cpu / n * 1e3, "per_s": done / wall, "lost": lost, "dup": dup,
            "backends": len(backends)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--variants", default="batch,lean")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--old-tree", default="", help="checkout the `old` variant runs, e.g. "
                        "`git archive <commit> | tar -x -C /tmp/base`")
    args = parser.parse_args()
    harness.django_setup(own_redis_prefix=True)
    harness.ensure_database()
    harness.manage("migrate", "--noinput")
    from bench.owner import bench_client
    from templates.services import template_create

    client = bench_client()
    version = template_create(client=client, name=f"bench-send-one-{uuid.uuid4().hex[:6]}",
                              subject="Your code is {{ code }}",
                              html_body="<p>Your sign-in code is <b>{{ code }}</b>.</p>")
    logs = harness.log_dir(harness.LOG_DIR / "send_one_cpu")
    variants = args.variants.split(",")
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for run in range(args.runs):
        for variant in variants:
            load = Path("/proc/loadavg").read_text().split()[:3]
            figures = run_once(variant, args, version, client, logs)
            results[variant].append(figures)
            print(f"run={run + 1} variant={variant} messages={args.messages} "
                  f"worker_cpu_ms_per_msg={figures['worker_ms']:.2f} "
                  f"(pool parent {figures['parent_ms']:.2f}) pg_cpu_ms_per_msg={figures['pg_ms']:.2f} "
                  f"per_s={figures['per_s']:.0f} lost={figures['lost']} dup={figures['dup']} "
                  f"backends={figures['backends']} load={' '.join(load)}", flush=True)
    for variant, runs in results.items():
        print(f"median variant={variant} worker_cpu_ms_per_msg="
              f"{statistics.median(r['worker_ms'] for r in runs):.2f} pg_cpu_ms_per_msg="
              f"{statistics.median(r['pg_ms'] for r in runs):.2f} per_s="
              f"{statistics.median(r['per_s'] for r in runs):.0f} "
              f"lost={sum(r['lost'] for r in runs)} dup={sum(r['dup'] for r in runs)}")


if __name__ == "__main__":
    main()
