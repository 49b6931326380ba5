"""Statistics per UTC day (issue 30, decision 118): a service's, a campaign's and the platform's.

A day whose facts were written (FactsDay: every closed day, by the hourly run) is answered from
the facts; any other day (today, yesterday before its first write, a day never written) from the
message rows by the facts writer's own SELECT (`counted_sql`), if its rows are still kept (the
service's metadata horizon), else it has no figures (`source: none`). Facts and rows count the
same things the same way, so a range that spans both reads as one (tests/analytics/test_facts.py
holds the two to each other).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Q, Sum

from analytics.horizon import day_start, rows_kept, utc_today
from analytics.models import COUNTERS, DayFact, FactsDay
from analytics.services.facts import counted_params, counted_sql
from clients.key_types import KeyType

# `by`: the dimension a range is split by, and its column (in the facts and in counted_sql).
BY = {"template": "template_id", "campaign": "campaign_id", "stream": "stream", "topic": "topic_id"}
# The longest range one request may ask for.
MAX_DAYS = 400
# The dashboard's days: the platform's live mail of its last days, from the facts (recounted
# once a minute per web process, not on every 2 s poll).
DASHBOARD_DAYS = 14
DASHBOARD_DAYS_SECONDS = 60


def dates(day_from: date, day_to: date) -> list[date]:
    return [day_from + timedelta(days=n) for n in range((day_to - day_from).days + 1)]


def written_days(days: Iterable[date], *, now: datetime | None = None) -> set[date]:
    """The days whose facts hold the whole day (written after it closed), and today if it was
    written so far. A past day last written before its close (the periodic run stopped at
    midnight) is not one: its facts miss the day's end."""
    today = utc_today(now)
    found = FactsDay.objects.filter(day__in=list(days)).values_list("day", "written_at")
    return {d for d, at in found if d == today or at >= day_start(d + timedelta(days=1))}


def _key_side(key_type: str) -> tuple[Q, str]:
    """The facts filter and the rows' SQL of the side a caller of this key type reads (a test
    key its test mail, a live or team key everything else: clients.key_types.on_callers_side)."""
    if key_type == KeyType.TEST:
        return Q(key_type=KeyType.TEST), "m.key_type = 'test'"
    return ~Q(key_type=KeyType.TEST), "m.key_type <> 'test'"


Figures = dict[tuple[date, Any], dict[str, int]]


def _from_facts(facts: Q, days: list[date], by: str | None) -> Figures:
    if not days:
        return {}
    columns = ["day", *([BY[by]] if by else [])]
    rows = (DayFact.objects.filter(facts, day__in=days).values(*columns)
            .annotate(**{name: Sum(name) for name in COUNTERS}).order_by())
    return {(row["day"], row[BY[by]] if by else None): {name: int(row[name]) for name in COUNTERS}
            for row in rows}


def _runs(days: list[date]) -> list[tuple[date, date]]:
    """Consecutive days as (first, last) spans: a day and today never read the days between."""
    runs: list[tuple[date, date]] = []
    for d in sorted(days):
        if runs and d == runs[-1][1] + timedelta(days=1):
            runs[-1] = (runs[-1][0], d)
        else:
            runs.append((d, d))
    return runs


def _from_rows(where: str, params: dict[str, object], days: list[date], by: str | None) -> Figures:
    """The figures of `days` straight from the rows: one statement per span of consecutive days."""
    key = f"c.{BY[by]}" if by else "NULL"
    sums = ", ".join(f"sum(c.{name})::int" for name in COUNTERS)
    sql = f"SELECT c.day, {key}, {sums} FROM ({counted_sql(where)}) c GROUP BY 1, 2"
    figures: Figures = {}
    with connection.cursor() as cursor:
        for first, last in _runs(days):
            cursor.execute(sql, {**counted_params(day_from=first, day_to=last), **params})
            figures.update({(row[0], row[1]): dict(zip(COUNTERS, map(int, row[2:]), strict=True))
                            for row in cursor.fetchall()})
    return figures


def _split(owner: Any, days: list[date], now: datetime | None) -> dict[str, list[date]]:
    """Which of `days` come from the facts, which from the rows, which have no figures."""
    written = written_days(days, now=now)
    kept = [d for d in days if d not in written and rows_kept(owner, d, now=now)]
    return {"facts": [d for d in days if d in written], "rows": kept,
            "none": [d for d in days if d not in written and d not in kept]}


def _answer(day_from: date, day_to: date, by: str | None, sources: dict[str, list[date]],
            figures: Figures) -> dict[str, Any]:
    totals = {name: sum(f[name] for f in figures.values()) for name in COUNTERS}
    source_of = {d: source for source, days in sources.items() for d in days}
    if by is None:
        zero = dict.fromkeys(COUNTERS, 0)
        points = [{"date": d.isoformat(), **figures.get((d, None), zero), "source": source_of[d]}
                  for d in dates(day_from, day_to)]
    else:
        ordered = sorted(figures.items(), key=lambda item: (item[0][0], str(item[0][1])))
        points = [{"date": d.isoformat(), by: key, **values} for (d, key), values in ordered]
    return {"from": day_from.isoformat(), "to": day_to.isoformat(), "by": by, "points": points,
            "totals": totals, "sources": {source: len(days) for source, days in sources.items()}}


def service_days(*, service: Any, key_type: str, day_from: date, day_to: date, by: str | None = None,
                 now: datetime | None = None) -> dict[str, Any]:
    """A service's figures per UTC day from `day_from` to `day_to` (both included), on the side
    of its caller's key type, each day (or each day and `by` value) one point."""
    days = dates(day_from, day_to)
    sources = _split(service, days, now)
    facts_side, rows_side = _key_side(key_type)
    figures = _from_facts(Q(service_id=service.pk) & facts_side, sources["facts"], by)
    figures.update(_from_rows(f"m.client_id = %(service)s AND {rows_side}", {"service": service.pk},
                              sources["rows"], by))
    return _answer(day_from, day_to, by, sources, figures)


def campaign_days(*, campaign: Any, day_from: date, day_to: date,
                  now: datetime | None = None) -> dict[str, Any]:
    """A campaign's figures per UTC day (its messages are all of its own key type)."""
    days = dates(day_from, day_to)
    sources = _split(campaign.client, days, now)
    figures = _from_facts(Q(campaign_id=campaign.pk), sources["facts"], None)
    figures.update(_from_rows("m.campaign_id = %(campaign)s", {"campaign": campaign.pk}, sources["rows"],
                              None))
    return _answer(day_from, day_to, None, sources, figures)


def campaign_lifetime_counts(*, campaign: Any, now: datetime | None = None) -> dict[str, int]:
    """sent, failed and suppressed over the campaign's whole life, for a campaign whose rows
    may be gone: the facts of its written days, plus its rows of the days not written."""
    today = utc_today(now)
    first = min(campaign.created_at.date(), today)
    answer = campaign_days(campaign=campaign, day_from=first, day_to=today, now=now)
    return {name: answer["totals"][name] for name in ("sent", "failed", "suppressed")}


def platform_days(*, days: int = DASHBOARD_DAYS, now: datetime | None = None) -> dict[str, Any]:
    """The dashboard's days: every service's live mail (test keys' left out, as in the other
    live figures) of the last `days` closed days, from the facts only; a day not written yet
    says so (`source: none`). Cached DASHBOARD_DAYS_SECONDS."""
    today = utc_today(now)
    key = f"dashboard:facts-days:{today.isoformat()}:{days}"
    found = cache.get(key)
    if found is not None:
        return found
    day_from, day_to = today - timedelta(days=days), today - timedelta(days=1)
    span = dates(day_from, day_to)
    written = written_days(span, now=now)
    sources = {"facts": [d for d in span if d in written], "rows": [],
               "none": [d for d in span if d not in written]}
    figures = _from_facts(~Q(key_type=KeyType.TEST), sources["facts"], None)
    answer = _answer(day_from, day_to, None, sources, figures)
    cache.set(key, answer, DASHBOARD_DAYS_SECONDS)
    return answer
