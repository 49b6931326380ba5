"""Benchmark: cost of the message table's index set per fan-out chunk, old set vs new, A/B.

    DATABASE_URL=postgres://... python bench/message_indexes.py [--chunks 40] [--no-fk]

The full fan-out (bench/campaign_fanout.py) takes minutes and swings with the machine's load;
this runs the fan-out's own chunk statement (campaigns.services.fanout.chunk_statement) into
scratch copies of the message table that differ only in their indexes, alternating chunk by
chunk, so both sets see the same load. Prints the median milliseconds per 1000 rows for each
set (commit included: deferred FK checks run there). Needs >= chunks x 1000 contacts.
Scratch tables and the campaign row are dropped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

# Index sets as they stand on PostgreSQL: before decision 27 (migrations 0001-0004) and after.
OLD = [
    "UNIQUE (idempotency_key)",
    "(idempotency_key varchar_pattern_ops)",
    "(campaign_id)", "(cancel_key)", "(cancel_key varchar_pattern_ops)", "(client_id)",
    "(client_id varchar_pattern_ops)", "(contact_id)", "(template_version_id)",
    "(campaign_id, status)", "(provider_message_id)", "(recipient)", "(status, claimed_at)",
]
NEW = [
    "UNIQUE (idempotency_key)",
    "(status, claimed_at)", "(campaign_id, status)", "(recipient)",
    "(provider_message_id) WHERE provider_message_id <> ''",
    "(client_id, cancel_key) WHERE cancel_key <> ''",
    "(client_id) WHERE client_id IS NOT NULL",
    "(contact_id) WHERE contact_id IS NOT NULL",
]
OLD_FKS = {
    "campaign_id": "campaigns_campaign", "client_id": "clients_apiclient",
    "contact_id": "audience_contact", "template_version_id": "templates_templateversion",
}
# Contact and template version are enforced by Django, not by a per-row check (decision 27).
NEW_FKS = {"campaign_id": "campaigns_campaign", "client_id": "clients_apiclient"}


def create_table(cursor, name: str, indexes: list[str], fks: dict[str, str]) -> None:
    from campaigns.services.fanout import MESSAGE_TABLE

    cursor.execute(f"DROP TABLE IF EXISTS {name}")
    cursor.execute(f"CREATE TABLE {name} (LIKE {MESSAGE_TABLE} INCLUDING DEFAULTS INCLUDING IDENTITY)")
    cursor.execute(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
    for n, definition in enumerate(indexes):
        if definition.startswith("UNIQUE"):
            cursor.execute(f"CREATE UNIQUE INDEX {name}_u{n} ON {name} {definition[len('UNIQUE '):]}")
        else:
            cursor.execute(f"CREATE INDEX {name}_i{n} ON {name} {definition}")
    for column, parent in fks.items():
        cursor.execute(f"ALTER TABLE {name} ADD FOREIGN KEY ({column}) REFERENCES {parent}(id) "
                       "DEFERRABLE INITIALLY DEFERRED")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--no-fk", action="store_true", help="scratch tables without foreign keys")
    parser.add_argument("--same-fks", action="store_true", help="new table keeps the old foreign keys")
    args = parser.parse_args()
    harness.django_setup()
    from django.db import connection, transaction

    from bench.owner import bench_client
    from campaigns.models import Campaign
    from campaigns.services.fanout import MESSAGE_TABLE, chunk_statement
    from core.priorities import Priority
    from templates.services import template_create

    owner = bench_client()  # the owner of the contacts: import them with --client bench
    version = template_create(client=owner, name=f"bench-idx-{int(time.time())}", subject="Hi",
                              html_body="<p>x</p>")
    everyone = {"conditions": [{"attribute": "orders", "op": "gte", "value": 0}]}
    campaign = Campaign.objects.create(
        name="bench indexes", template_version=version, status=Campaign.Status.QUEUED,
        priority=Priority.NORMAL,
        audience={"client_id": owner.pk, "type": "segment", "definition": everyone},
    )
    statement = chunk_statement(campaign)
    tables = {"old": "bench_msg_old_idx", "new": "bench_msg_new_idx"}
    timings: dict[str, list[float]] = {k: [] for k in tables}
    cursors = {k: 0 for k in tables}
    try:
        with connection.cursor() as cursor:
            new_fks = OLD_FKS if args.same_fks else NEW_FKS
            create_table(cursor, tables["old"], OLD, {} if args.no_fk else OLD_FKS)
            create_table(cursor, tables["new"], NEW, {} if args.no_fk else new_fks)
        for _ in range(args.chunks):
            for key, table in tables.items():
                started = time.perf_counter()
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
                    sql = statement.sql.replace(MESSAGE_TABLE, table)
                    cursor.execute(sql, statement.params(cursors[key]))
                    cursors[key] = cursor.fetchone()[0]
                timings[key].append((time.perf_counter() - started) * 1000)
    finally:
        with connection.cursor() as cursor:
            for table in tables.values():
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
        campaign.delete()
    for key, values in timings.items():
        median = statistics.median(values)
        fks = {} if args.no_fk else OLD_FKS if key == "old" or args.same_fks else NEW_FKS
        print(f"{key}: {len(OLD if key == 'old' else NEW)} indexes + pkey, "
              f"median {median:.1f} ms per 1000 rows ({1000 / median * 1000:,.0f} rows/s), "
              f"fks={','.join(fks) or 'none'}")
    print(f"saving: {1 - statistics.median(timings['new']) / statistics.median(timings['old']):.0%}")


if __name__ == "__main__":
    main()
