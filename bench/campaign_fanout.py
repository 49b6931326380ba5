"""Benchmark: fan-out of a 1,000,000-contact segment (rows written + batch tasks queued).

    DATABASE_URL=postgres://... REDIS_URL=redis://... python bench/campaign_fanout.py --client NAME \
        [--priority normal] [--connections 2] [--topic-unsubscribed 10]

Needs >= 1M contacts of the client NAME (python manage.py import_contacts bench-contacts.csv
--client NAME; `--make-csv PATH [--rows N]` writes one); the campaign is that client's, so its
audience is that client's contacts only (decision 50). Runs the real fan-out service in this
process against PostgreSQL and the broker, prints seconds, rows/s, tasks published and this
process's peak RSS, its CPU and the CPU of this database's PostgreSQL backends (bench/pg_cpu.py)
per 1000 rows, and the load average, then deletes the rows and purges the send queue it filled. Stop send
workers first, or they will start sending.
`--topic-unsubscribed P`: the campaign names a topic that P% of the contacts left (every
(100/P)th contact by id; the choices are written once and kept): what consent's anti-joins cost
(issue 28, the 1M fan-out within 10% of the one with no topic). `pg_ms_per_1000_contacts`
compares runs that write different numbers of rows.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness


def make_csv(path: str, n: int) -> None:
    zones = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC", ""]
    with open(path, "w") as handle:
        handle.write("email,name,timezone,locale,plan,orders\n")
        for i in range(n):
            plan = ("free", "pro")[i % 2]
            handle.write(f"person{i}@example.com,Person {i},{zones[i % 5]},en,{plan},{i % 50}\n")


def topic_with_leavers(owner: object, percent: float) -> object:
    """The owner's bench topic, with `percent` of its contacts unsubscribed from it (one INSERT
    ... SELECT the first time; the same contacts every run)."""
    from django.db import connection

    from audience.models import Contact, Topic, TopicSubscription

    topic, _ = Topic.objects.get_or_create(client=owner, name=f"bench-{percent:g}pct-left")
    step = max(1, round(100 / percent))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TopicSubscription._meta.db_table} (topic_id, email, subscribed, updated_at) "
            f"SELECT %s, email, FALSE, now() FROM {Contact._meta.db_table} "
            "WHERE client_id = %s AND id %% %s = 0 "
            "ON CONFLICT (topic_id, email) DO NOTHING",
            [topic.pk, owner.pk, step],
        )
        cursor.execute(f"ANALYZE {TopicSubscription._meta.db_table}")
    return topic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--priority", default="normal")
    parser.add_argument("--make-csv", default="")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows --make-csv writes")
    parser.add_argument("--client", default="", help="the service (id, name or a key prefix) owning contacts")
    parser.add_argument("--keep", action="store_true", help="keep the rows (for a send benchmark)")
    parser.add_argument("--topic-unsubscribed", type=float, default=0.0,
                        help="percent of the contacts who left the campaign's topic (0: no topic)")
    parser.add_argument("--connections", type=int, default=0,
                        help="NOTIFIER_FANOUT_CONNECTIONS for this run (default: the setting)")
    args = parser.parse_args()
    if args.make_csv:
        make_csv(args.make_csv, args.rows)
        return
    harness.django_setup()
    from django.conf import settings
    from django.db import connection

    from audience.models import Contact
    from bench.pg_cpu import BackendCpu
    from campaigns.models import Campaign
    from campaigns.services.fanout import campaign_fanout
    from clients.tenancy import service_by_reference
    from core.priorities import Priority, queue_for
    from delivery.models import EmailMessage
    from notifier.celery import app
    from templates.services import template_create

    owner = service_by_reference(args.client)
    contacts = Contact.objects.filter(client=owner).count()
    version = template_create(client=owner, name=f"bench-{int(time.time())}", subject="Hi {{ name }}",
                              html_body="<p>x</p>")
    definition = {"conditions": [{"attribute": "orders", "op": "gte", "value": 0}]}
    campaign = Campaign.objects.create(
        name="bench fan-out", client=owner, template_version=version, status=Campaign.Status.QUEUED,
        priority=Priority.from_label(args.priority),
        audience={"client_id": owner.pk, "type": "segment", "definition": definition},
        topic=topic_with_leavers(owner, args.topic_unsubscribed) if args.topic_unsubscribed else None,
    )
    if args.connections:
        settings.NOTIFIER_FANOUT_CONNECTIONS = args.connections
    load_before = Path("/proc/loadavg").read_text().split()[0]
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    with BackendCpu(connection.settings_dict["NAME"]) as pg:
        report = campaign_fanout(campaign_id=campaign.pk)
    elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    python_cpu = usage.ru_utime + usage.ru_stime - usage_before.ru_utime - usage_before.ru_stime
    per_k = 1000 / max(report.inserted, 1)
    scanned = report.inserted + report.excluded
    print(f"contacts={contacts} rows={report.inserted} excluded={report.excluded} tasks={report.tasks} "
          f"seconds={elapsed:.1f} rows_per_s={report.inserted / elapsed:,.0f} "
          f"peak_rss_mb={usage.ru_maxrss / 1024:.0f} priority={args.priority} "
          f"connections={getattr(settings, 'NOTIFIER_FANOUT_CONNECTIONS', 1)} "
          f"python_cpu_s={python_cpu:.1f} pg_cpu_s={pg.seconds:.1f} "
          f"pg_ms_per_1000_rows={pg.seconds * 1000 * per_k:.1f} "
          f"pg_ms_per_1000_contacts={pg.seconds * 1_000_000 / max(scanned, 1):.1f} "
          f"topic_unsubscribed_pct={args.topic_unsubscribed:g} "
          f"load={load_before}->{Path('/proc/loadavg').read_text().split()[0]}")
    if not args.keep:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(queue_for(Priority.from_label(args.priority)))
        with connection.cursor() as cursor:  # raw: the ORM would load a million rows to cascade
            cursor.execute(f"DELETE FROM {EmailMessage._meta.db_table} WHERE campaign_id = %s", [campaign.pk])
            # The next run must not insert into a table and indexes holding a million dead rows
            # (autovacuum may be off or behind on a shared server: runs then do not compare).
            cursor.execute(f"VACUUM {EmailMessage._meta.db_table}")
        campaign.delete()


if __name__ == "__main__":
    main()
