"""Whole send pipeline throughput (claim, render, hand-off, batch-API call, record) to a local
fake ESP, in worker-like processes without the broker: the ceiling of one `send_batch` task
type on this machine. Complements esp_throughput.py (provider and wire only).

    DATABASE_URL=postgres://.../notifier_bench REDIS_URL=redis://127.0.0.1:6379/N \
        python bench/pipeline_throughput.py --messages 20000 --processes 2 --batch 500 [--provider mailgun]
(the database must be migrated: python manage.py migrate)

Prints the CPU time per message of the worker-like processes (their own process_time, Python
and client-side driver work; PostgreSQL's own CPU is not in it).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.owner import bench_client

harness.django_setup(own_redis_prefix=True)

from django.db import connections  # noqa: E402

from bench.esps import ledger_counts, through_fake_esp  # noqa: E402
from delivery.models import EmailMessage  # noqa: E402
from templates.services import template_create  # noqa: E402


def _rows(n: int) -> list[int]:
    version = template_create(
        client=bench_client(), name=f"bench-{uuid.uuid4().hex[:6]}", subject="Digest for {{ name }}",
                              html_body="<p>Hello <b>{{ name }}</b>, here is your digest.</p>")
    tag = uuid.uuid4().hex[:8]
    ids: list[int] = []
    for start in range(0, n, 5000):
        rows = EmailMessage.objects.bulk_create(
            EmailMessage(recipient=f"r{i}@example.com", context={"name": f"Reader {i}"},
                         template_version=version, priority=3, idempotency_key=f"pb-{tag}-{i}")
            for i in range(start, min(n, start + 5000))
        )
        ids += [row.id for row in rows]
    return ids


def _work(batches: list[list[int]], url: str, provider: str) -> tuple[int, float]:
    """(messages sent, CPU seconds this process spent sending them)."""
    from django.conf import settings

    from delivery.services.sending import message_batch_send

    settings.NOTIFIER_PROVIDERS = [provider]
    settings.SENDGRID_API_URL, settings.SENDGRID_API_KEY = url, "bench"
    settings.MAILGUN_API_URL, settings.MAILGUN_API_KEY = url, "bench"
    settings.MAILGUN_DOMAIN = "mg.example.org"
    cpu = time.process_time()
    sent = sum(message_batch_send(message_ids=b, token=uuid.uuid4().hex).sent for b in batches)
    return sent, time.process_time() - cpu


def _send(ids: list[int], url: str, processes: int, batch: int, provider: str) -> tuple[int, float, float]:
    """(messages sent, seconds, worker CPU seconds) by `processes` forked worker-like processes,
    `batch` ids a call."""
    batches = [ids[i:i + batch] for i in range(0, len(ids), batch)]
    shares = [batches[i::processes] for i in range(processes)]
    connections.close_all()  # each forked process opens its own
    started = time.perf_counter()
    with mp.get_context("fork").Pool(processes) as pool:
        results = pool.starmap(_work, [(share, url, provider) for share in shares])
    return sum(s for s, _ in results), time.perf_counter() - started, sum(c for _, c in results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--provider", choices=["sendgrid", "mailgun"], default="sendgrid")
    args = parser.parse_args()
    ids = _rows(args.messages)
    (sent, elapsed, cpu), entries = through_fake_esp(
        args.provider, lambda url: _send(ids, url, args.processes, args.batch, args.provider))
    distinct, duplicated = ledger_counts(entries)
    print(f"provider={args.provider} messages={args.messages} processes={args.processes} batch={args.batch} "
          f"loadavg={harness.loadavg()}")
    print(f"sent={sent} ledger_entries={len(entries)} duplicates={duplicated} "
          f"lost={args.messages - distinct}")
    print(f"elapsed={elapsed:.2f}s throughput={args.messages / elapsed:,.0f} messages/s "
          f"worker_cpu_us_per_message={cpu / args.messages * 1e6:,.0f}")


if __name__ == "__main__":
    main()
