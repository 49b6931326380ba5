"""Where PostgreSQL's time goes, by process and statement: samples pg_stat_activity.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/notifier_million \
        .venv/bin/python bench/pg_activity.py --seconds 180 --interval 0.2 --top 25

Every `--interval` s it reads the active sessions of the database (our processes name their
sessions `notifier-<role>`) and counts (application, wait event, statement) samples; at the end
it prints the most sampled, each with its share of the samples and the estimated seconds it was
running (samples x interval). A statement running 1 s in 5 shows as ~20% of that process's
samples: the figure to compare between two versions of the code on the same load.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections import Counter

import psycopg2

_ACTIVE = ("SELECT coalesce(nullif(application_name, ''), backend_type), coalesce(wait_event, 'cpu'),"
           " query FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()"
           " AND datname = current_database()")
_LITERALS = re.compile(r"'[^']*'|\b\d+\b")


def _shape(query: str, width: int) -> str:
    """The statement without its literals, on one line, cut to `width`."""
    return " ".join(_LITERALS.sub("?", query).split())[:width]


def sample(dsn: str, seconds: float, interval: float, width: int) -> tuple[Counter, int]:
    counts: Counter = Counter()
    taken = 0
    deadline = time.monotonic() + seconds
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            while time.monotonic() < deadline:
                cursor.execute(_ACTIVE)
                for application, wait, query in cursor.fetchall():
                    counts[(application, wait, _shape(query, width))] += 1
                taken += 1
                time.sleep(interval)
    finally:
        conn.close()
    return counts, taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--width", type=int, default=160)
    args = parser.parse_args()
    counts, taken = sample(os.environ["DATABASE_URL"], args.seconds, args.interval, args.width)
    per_app = Counter()
    for (application, _, _), n in counts.items():
        per_app[application] += n
    print(f"{taken} samples every {args.interval}s; active-session seconds per application:")
    for application, n in per_app.most_common():
        print(f"  {application:28} {n * args.interval:8.1f}s")
    print("most sampled (application, wait, statement):")
    for (application, wait, query), n in counts.most_common(args.top):
        share = 100 * n / per_app[application]
        print(f"  {n * args.interval:7.1f}s {share:5.1f}%  {application:22} {wait:14} {query}")


if __name__ == "__main__":
    main()
