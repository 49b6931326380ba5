"""Benchmark: CPU per message of the send service, in this process, to an SMTP server.

    /usr/sbin/smtp-sink -u nobody 127.0.0.1:2599 1000 &
    SMTP_PORT=2599 DATABASE_URL=... REDIS_URL=... python bench/send_batch_cpu.py [--messages 5000] \
        [--priority low] [--classic]

Writes campaign messages (List-Unsubscribe headers, a per-recipient HTML part) for existing
contacts, sends them with `message_batch_send` in batches of 500 (claim, load, suppression
re-check, render, hand-off mark, SMTP, attempt rows, result marks), and prints wall time and this
process's CPU time per message, the CPU of this database's PostgreSQL backends per message
(bench/pg_cpu.py) and SQL statements per batch, then the top functions by cumulative time
(`--profile`). Batches go as the task sends them (its priority: a bulk P3 batch claims and hands
over in one write, decision 59); `--classic` sends them without the priority (claim, then mark).
CPU time moves much less than wall time on a shared machine: compare code versions with it.
Rows, attempts and the campaign are deleted at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=0, help="default: the priority's batch size")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="cumulative")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--priority", default="low")
    parser.add_argument("--classic", action="store_true", help="claim and hand-off as two writes")
    args = parser.parse_args()
    harness.django_setup()
    from django.db import connection

    from audience.models import Contact
    from bench.owner import bench_client
    from bench.pg_cpu import BackendCpu
    from campaigns.models import Campaign
    from core.priorities import Priority, batch_size_for
    from delivery.models import DeliveryAttempt, EmailMessage
    from delivery.services.sending import message_batch_send
    from templates.services import template_create

    version = template_create(
        client=bench_client(), name=f"bench-cpu-{uuid.uuid4().hex[:6]}",
        subject="Hello {{ name }}, this is a notifier demo",
        html_body="<h1>Hi {{ name }}</h1><p>This campaign went out to everyone on the demo list.</p>",
    )
    priority = Priority.from_label(args.priority)
    batch = args.batch or batch_size_for(priority)
    campaign = Campaign.objects.create(name="bench cpu", template_version=version, priority=priority,
                                       status=Campaign.Status.SENDING, audience={"type": "inline"})
    named = Contact.objects.exclude(name="").order_by("id")
    contacts = list(named.values_list("id", "email")[: args.messages])
    # As the fan-out writes them: no copy of the contact's data, read at send (decision 65).
    rows = [
        EmailMessage(campaign=campaign, contact_id=pk, recipient=email, context={},
                     template_version=version, priority=priority,
                     idempotency_key=f"bench-cpu:{campaign.pk}:{pk}")
        for pk, email in contacts
    ]
    ids = [m.pk for m in EmailMessage.objects.bulk_create(rows, batch_size=2000)]
    profiler = cProfile.Profile() if args.profile else None
    sent = batches = 0
    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    task_priority = None if args.classic else int(priority)
    load = Path("/proc/loadavg").read_text().split()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    with BackendCpu(connection.settings_dict["NAME"]) as pg, connection.execute_wrapper(count):
        for start in range(0, len(ids), batch):
            report = message_batch_send(message_ids=ids[start:start + batch], token=uuid.uuid4().hex,
                                        priority=task_priority)
            sent += report.sent
            batches += 1
    if profiler:
        profiler.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"messages={len(ids)} sent={sent} wall_s={wall:.2f} per_s={len(ids) / wall:,.0f} "
          f"cpu_us_per_message={cpu / len(ids) * 1e6:,.0f} wall_us_per_message={wall / len(ids) * 1e6:,.0f} "
          f"pg_cpu_us_per_message={pg.seconds / len(ids) * 1e6:,.0f} "
          f"statements_per_batch={statements[0] / max(batches, 1):.1f} "
          f"path={'classic' if args.classic else 'task'} priority={args.priority} "
          f"load={load}->{Path('/proc/loadavg').read_text().split()[0]}")
    if profiler:
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {DeliveryAttempt._meta.db_table} WHERE message_id = ANY(%s)", [ids])
        cursor.execute(f"DELETE FROM {EmailMessage._meta.db_table} WHERE id = ANY(%s)", [ids])
        # Each run updates every row 3-4 times: without a vacuum the next run reads dead tuples.
        cursor.execute(f"VACUUM {EmailMessage._meta.db_table}, {DeliveryAttempt._meta.db_table}")
    campaign.delete()


if __name__ == "__main__":
    main()
