"""The hand-off mark's generic plan, with the ids as an array and as a scalar (decision 133).

    DATABASE_URL=postgres://postgres@127.0.0.1:5441/notifier_growth_history REDIS_URL=... \\
        .venv/bin/python bench/prepared_pruning.py [--ids 50]

On a database that holds messages (the month of history a `bench/history_growth.py --keep` run
leaves, or any install), PREPAREs the single-message hand-off UPDATE as `execute_prepared` does,
in its two shapes, forces the generic plan PostgreSQL uses after five executions, and runs
EXPLAIN ANALYZE of each for the --ids newest messages under a claim token no row has (nothing is
changed; the transaction is rolled back): the median execution time and shared-buffer hits.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")


def newest_ids(count: int) -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM delivery_emailmessage ORDER BY id DESC LIMIT %s", [count])
        return [row[0] for row in cursor.fetchall()]


def generic_plan_figures(sql: str, ids: list[int], id_param: Callable[[int], object]) -> tuple[float, float]:
    """(median execution ms, median shared hits) of `sql`'s generic plan, once per id."""
    from django.db import connection, transaction
    from django.utils import timezone

    from delivery.services.ledger.prepared import _numbered
    from delivery.services.ledger.sql import placeholders

    now, times, hits = timezone.now(), [], []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE pruning_probe AS {_numbered(sql)}")
        for message_id in ids:
            params = [now, "SUPPRESSED", "probe", "smtp", id_param(message_id), id_param(message_id),
                      "SENDING", "no-such-claim-token", now]
            explain = f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE pruning_probe ({placeholders(params)})"
            cursor.execute(explain, params)
            text = "\n".join(row[0] for row in cursor.fetchall())
            times.append(float(re.search(r"Execution Time: ([\d.]+)", text).group(1)))
            hits.append(int(re.search(r"shared hit=(\d+)", text).group(1)))
        cursor.execute("DEALLOCATE pruning_probe")
        transaction.set_rollback(True)
    return statistics.median(times), statistics.median(hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=50)
    args = parser.parse_args()
    import django

    django.setup()
    from delivery.services.ledger.send_path import hand_off_sql

    where = ("t.id = {} AND t.status = %s AND t.claim_token = %s "
             "AND (t.send_started_at IS NULL OR t.send_started_at = %s)")
    ids = newest_ids(args.ids)
    shapes = (("array, t.id = ANY($5) (before)", hand_off_sql(where.format("ANY(%s)")), lambda i: [i]),
              ("scalar, t.id = $5 (decision 133)", hand_off_sql(where.format("%s"), ids="m.id = %s"), int))
    for label, sql, id_param in shapes:
        ms, hits = generic_plan_figures(sql, ids, id_param)
        print(f"{label}: execution median {ms:.3f} ms, shared hits median {hits:g} ({len(ids)} messages)")


if __name__ == "__main__":
    main()
