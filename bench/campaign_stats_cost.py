"""Benchmark: where the time of `GET /api/v1/campaigns/{id}/stats` goes, in-process (issue 30).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/campaign_stats_cost.py [--calls 20] [--interval minute] [--profile 3] \\
        [--database pstats] [--keep | --reuse]

Makes its own database (`pstats` on DATABASE_URL's server, migrated) holding what the stats of
bench/history_growth.py's history campaign read: one COMPLETED campaign created 30 hours ago with
250,000 messages (90% DELIVERED, 10% SENT, one provider) sent over 10 minutes, between 750,000
other messages of its service (the campaign a quarter of its week's partition), its counter row,
its minute tally (decision 125) over 780 minutes (delivered and bounced in the first 11, opened
in the first 720, clicked from minute 30 on: 1,492 rows, 780 points at interval=minute) and 50
unsubscribes; all by INSERT .. SELECT over generate_series (~40 s).

Then --calls requests through DRF's APIClient (the whole Django stack, no HTTP server), after two
warm-up calls, each split into: authentication, permissions and throttling (DRF's `initial`); the
query parameters and the campaign's row; each selector's own wall time and database time (an
execute_wrapper); the JSON rendering; the rest (middleware, routing, the test client). Medians and
p90 of the calls; then --profile calls under cProfile (the 25 costliest functions by own time).
The database is dropped at the end unless --keep; --reuse measures a kept one without loading.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.harness import percentile, sql

NAME = "stats-cost"
MESSAGES = 250_000
OTHERS = 750_000  # the service's other mail of the week: the campaign is a quarter of the table
TALLY_MINUTES = 780
# Selectors timed on their own (analytics.selectors.campaign_stats looks each up by its global
# name, so replacing the module attribute times every call).
SELECTORS = ("campaign_row_counts", "campaign_counts", "campaign_rows_may_be_gone", "campaign_rates",
             "campaign_providers", "campaign_unsubscribes_by_topic", "campaign_series")


# --- the rows ----------------------------------------------------------------------------------


def load() -> tuple[int, str]:
    """The service, its key, the campaign and its rows; returns (campaign id, key)."""
    from datetime import UTC, datetime, timedelta

    from campaigns.models import Campaign
    from clients.services import service_create
    from templates.services import template_create

    service, key = service_create(name=NAME, rate_limit="1000000/min")
    version = template_create(client=service, name="history", subject="Hi", html_body="<p>Hi</p>")
    start = (datetime.now(UTC) - timedelta(hours=30)).replace(minute=0, second=0, microsecond=0)
    campaign = Campaign.objects.create(
        name=NAME, client=service, template_version=version, priority=3, status=Campaign.Status.COMPLETED,
        audience_size=MESSAGES, fanout_done=True, started_at=start, completed_at=start + timedelta(hours=1))
    Campaign.objects.filter(pk=campaign.pk).update(created_at=start)
    params = {"campaign": campaign.pk, "service": service.pk, "version": version.pk, "start": start,
              "minutes": TALLY_MINUTES}
    # The campaign among other mail of its week, as in the history (its rows together, written by
    # its fan-out): the planner's choice depends on it (CAMPAIGN_ROWS_PLAN).
    messages_insert(params, None, OTHERS // 2, start - timedelta(hours=12), 86_400_000_000 // OTHERS)
    # 10 minutes of sends, as the history's campaign burst (bench/history_rows.py).
    messages_insert(params, campaign.pk, MESSAGES, start, 600_000_000 // MESSAGES)
    messages_insert(params, None, OTHERS - OTHERS // 2, start + timedelta(hours=1), 86_400_000_000 // OTHERS)
    sql("""
        INSERT INTO feedback_campaigneventminute (campaign_id, minute, provider, kind, events, firsts)
        SELECT %(campaign)s, %(start)s::timestamptz + m * interval '1 minute', 'sendgrid', k.kind,
          k.events, k.firsts
        FROM generate_series(0, %(minutes)s - 1) m
        CROSS JOIN (VALUES ('delivered', 20454, 20454), ('bounced', 455, 455), ('opened', 300, 200),
                           ('clicked', 40, 30)) k(kind, events, firsts)
        WHERE (k.kind IN ('delivered', 'bounced') AND m < 11) OR (k.kind = 'opened' AND m < 720)
           OR (k.kind = 'clicked' AND m >= 30)""", params)
    sql("""
        INSERT INTO feedback_campaigneventcounter (campaign_id, delivered, opened, clicked, bounced,
          soft_bounced, complained, unsubscribed, updated_at)
        SELECT %(campaign)s, sum(firsts) FILTER (WHERE kind = 'delivered'),
          sum(firsts) FILTER (WHERE kind = 'opened'), sum(firsts) FILTER (WHERE kind = 'clicked'),
          sum(firsts) FILTER (WHERE kind = 'bounced'), 0, 0, 50, now()
        FROM feedback_campaigneventminute WHERE campaign_id = %(campaign)s""", params)
    sql("""
        INSERT INTO audience_consentchange (client_id, email, topic_id, subscribed, source, campaign_id,
          occurred_at)
        SELECT %(service)s, 'h' || g || '@example.com', NULL, false, 'link', %(campaign)s,
          %(start)s::timestamptz + g * interval '1 minute'
        FROM generate_series(1, 50) g""", params)
    for table in ("delivery_emailmessage", "feedback_campaigneventminute", "audience_consentchange"):
        sql(f"VACUUM ANALYZE {table}")
    return campaign.pk, key


def messages_insert(params: dict, campaign: int | None, count: int, start: Any, step_us: int) -> None:
    """`count` messages of the service, `step_us` microseconds apart from `start` (90% DELIVERED)."""
    sql("""
        INSERT INTO delivery_emailmessage (client_id, campaign_id, recipient, context, template_version_id,
          priority, status, provider, provider_message_id, attempts, idempotency_key, claim_token, error,
          created_at, claimed_at, sent_at, delivered_at, cancel_key, key_type, stream)
        SELECT %(service)s, %(campaign)s, 'h' || g || '@example.com', '{}'::jsonb, %(version)s, 3,
          CASE WHEN g %% 10 = 0 THEN 'SENT' ELSE 'DELIVERED' END, 'sendgrid', 'sg-' || g, 1,
          %(prefix)s || g, '', '', t.at, t.at, t.at + interval '1.5 seconds',
          CASE WHEN g %% 10 <> 0 THEN t.at + interval '6 seconds' END, '',  'live',
          CASE WHEN %(campaign)s::bigint IS NULL THEN 'transactional' ELSE 'broadcast' END
        FROM generate_series(1, %(count)s) g,
        LATERAL (SELECT %(start)s::timestamptz + g::bigint * %(step)s * interval '1 microsecond' AS at) t""",
        {**params, "campaign": campaign, "count": count, "start": start, "step": step_us,
         "prefix": f"c:{campaign}:" if campaign else f"o:{start.isoformat()}:"})


def found() -> tuple[int, str]:
    """A kept database's campaign, with a new key of its service (a key is shown only once)."""
    from campaigns.models import Campaign
    from clients.services import api_key_create

    campaign = Campaign.objects.get(name=NAME)
    _, key = api_key_create(service=campaign.client, name=f"{NAME}-{int(time.time())}")
    return campaign.pk, key


# --- the split -----------------------------------------------------------------------------------


class Split:
    """Per call: each phase's own wall time (its nested phases' taken out) and its queries' time."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.wall: dict[str, float] = defaultdict(float)
        self.db: dict[str, float] = defaultdict(float)
        self.queries: dict[str, int] = defaultdict(int)

    def timed(self, label: str, function: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.stack.append(label)
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.perf_counter() - began
                self.stack.pop()
                self.wall[label] += spent
                if self.stack:
                    self.wall[self.stack[-1]] -= spent  # the parent's own time
        return wrapper

    def on_query(self, execute: Callable, sql_text: str, params: Any, many: bool, context: dict) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            label = self.stack[-1] if self.stack else "outside"
            self.db[label] += time.perf_counter() - began
            self.queries[label] += 1


@contextmanager
def patched(split: Split) -> Iterator[None]:
    """Every phase's function replaced by its timed wrapper, restored after."""
    from rest_framework.renderers import JSONRenderer

    from analytics import api
    from analytics.selectors import campaign_stats as selectors

    targets = [(api.CampaignStatsApi, "initial", "auth, permissions, throttle"),
               (api.CampaignStatsApi, "get", "params, campaign row"),
               (api, "campaign_stats", "campaign_stats (own)"),
               (JSONRenderer, "render", "JSON rendering"),
               *((selectors, name, name) for name in SELECTORS)]
    saved = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in targets]
    try:
        for owner, name, label in targets:
            setattr(owner, name, split.timed(label, getattr(owner, name)))
        yield
    finally:
        for owner, name, original in saved:
            if original is None:
                delattr(owner, name)  # an inherited method (DRF's APIView.initial)
            else:
                setattr(owner, name, original)


def measure(api: Any, url: str, calls: int) -> tuple[list[Split], list[float], bytes]:
    from django.db import connection

    splits, totals, body = [], [], b""
    for _ in range(calls):
        split = Split()
        with patched(split), connection.execute_wrapper(split.on_query):
            began = time.perf_counter()
            response = api.get(url)
            totals.append(time.perf_counter() - began)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code} {response.content[:200]!r}")
        body = response.content
        splits.append(split)
    return splits, totals, body


def report(splits: list[Split], totals: list[float]) -> None:
    labels = [label for label in ["auth, permissions, throttle", "params, campaign row", *SELECTORS,
                                  "campaign_stats (own)", "JSON rendering"]
              if any(label in s.wall for s in splits)]
    print(f"{'phase':34} {'wall p50':>9} {'p90':>7} {'db p50':>7} {'queries':>7}   (ms)")
    accounted = [0.0] * len(splits)
    for label in labels:
        walls = [s.wall.get(label, 0.0) * 1000 for s in splits]
        dbs = [s.db.get(label, 0.0) * 1000 for s in splits]
        queries = sorted(s.queries.get(label, 0) for s in splits)
        accounted = [a + w for a, w in zip(accounted, walls, strict=True)]
        print(f"{label:34} {percentile(walls, 0.5):9.2f} {percentile(walls, 0.9):7.2f} "
              f"{percentile(dbs, 0.5):7.2f} {queries[len(queries) // 2]:7}")
    rest = [t * 1000 - a for t, a in zip(totals, accounted, strict=True)]
    print(f"{'the rest (middleware, routing)':34} {percentile(rest, 0.5):9.2f} {percentile(rest, 0.9):7.2f}")
    db_total = [sum(s.db.values()) * 1000 for s in splits]
    walls = [t * 1000 for t in totals]
    print(f"{'whole call':34} {percentile(walls, 0.5):9.2f} {percentile(walls, 0.9):7.2f} "
          f"{percentile(db_total, 0.5):7.2f}   (max {max(walls):.2f})")


def profile(api: Any, url: str, calls: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        api.get(url)
    profiler.disable()
    print(f"\ncProfile of {calls} calls, by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--interval", choices=["minute", "hour", "day"], default="minute")
    parser.add_argument("--profile", type=int, default=3, help="calls under cProfile (0: none)")
    parser.add_argument("--database", default="pstats")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--reuse", action="store_true", help="a kept database: no load; kept")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = harness.scratch_database_url(args.database)
    if not args.reuse:
        harness.server_statement(f'CREATE DATABASE "{args.database}"')
    harness.django_setup(own_redis_prefix=True)
    from django.db import connections
    from rest_framework.test import APIClient

    try:
        if args.reuse:
            campaign_id, key = found()
        else:
            harness.manage("migrate", "-v0", env={**os.environ})
            began = time.perf_counter()
            campaign_id, key = load()
            print(f"loaded {MESSAGES:,} messages and the tally in {time.perf_counter() - began:.1f} s")
        api = APIClient(HTTP_HOST="127.0.0.1")
        api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
        url = f"/api/v1/campaigns/{campaign_id}/stats?interval={args.interval}"
        measure(api, url, 2)  # warm-up: imports, the key's cache, the connection
        splits, totals, body = measure(api, url, args.calls)
        points = len(json.loads(body)["series"]["points"])
        print(f"{url}: {args.calls} calls, answer {len(body):,} bytes, {points} points; "
              f"load average {harness.loadavg()}")
        report(splits, totals)
        if args.profile:
            profile(api, url, args.profile)
    finally:
        connections.close_all()
        if not (args.keep or args.reuse):
            harness.database_drop(args.database)
            print(f"dropped database {args.database}")


if __name__ == "__main__":
    main()
