"""How the fan-out sets each message row's status and due time: the scheduling hook.

Today a campaign's schedule is `{"type": "immediate"}`: rows are written QUEUED and published
at once. The scheduling engine adds other schedule types by returning a `ScheduleSql` for them
from `schedule_sql()`: rows are then written SCHEDULED with a per-recipient `scheduled_for`
computed in SQL, and the fan-out publishes nothing for them (the scheduler dispatches them at
their due time). One ready-made shape is the "due map" (time zone -> due instant), joined on the
contact's time zone, with a default for contacts whose zone is missing from the map::

    {"type": "due_map", "due": {"Europe/Paris": "2026-12-01T08:00:00+00:00", ...},
     "default": "2026-12-01T09:00:00+00:00"}

which is what "9:00 in each recipient's local time" compiles to. A campaign's own schedule
(campaigns/campaign_schedule.py) is compiled once into `schedule["compiled"]`, one of:

    {"type": "at", "due": "<instant>"}                                  (scheduled: one instant)
    {"type": "due_map", ...}                                            (local_time, as above)
    {"type": "optimal_map", "due": {"<zone>|<hour>": "<instant>"}, "zones": [...],
     "default_zone": "UTC", "fallback_hour": 10, "window": [start, end]}

optimal joins each chunk's recipients to their best open hour (scheduling.selectors.
best_open_hour_sql, one aggregate per chunk) and then to the (zone, hour) -> instant map.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from delivery.models import EmailMessage
from scheduling.selectors import best_open_hour_sql

Status = EmailMessage.Status


@dataclass(frozen=True)
class ScheduleSql:
    joins: str = ""
    params: list[Any] = field(default_factory=list)
    status_expr: str = f"'{Status.QUEUED}'"
    scheduled_for_expr: str = "NULL::timestamptz"
    # True when rows are written QUEUED and must be published by the fan-out.
    publishes: bool = True


def _compiled(schedule: dict | None) -> dict:
    schedule = schedule or {}
    return schedule.get("compiled") or schedule


def _optimal_sql(schedule: dict) -> ScheduleSql:
    zone = "COALESCE((SELECT z FROM unnest(%s::text[]) z WHERE z = {col}), %s)"
    audience = (f"(SELECT e.email, {zone.format(col='e.timezone')} AS timezone FROM eligible e) a")
    joins = (
        f"LEFT JOIN ({best_open_hour_sql(audience)}) boh ON boh.email = c.email "
        "LEFT JOIN jsonb_each_text(%s::jsonb) AS due(k, due_at) ON due.k = "
        f"{zone.format(col='c.timezone')} || '|' || COALESCE(boh.hour, %s)"
    )
    zones, default_zone = schedule["zones"], schedule["default_zone"]
    params = [zones, default_zone, *schedule["window"], json.dumps(schedule["due"]), zones, default_zone,
              schedule["fallback_hour"]]
    return ScheduleSql(joins=joins, params=params, status_expr=f"'{Status.SCHEDULED}'",
                       scheduled_for_expr="due.due_at::timestamptz", publishes=False)


def schedule_sql(schedule: dict) -> ScheduleSql:
    schedule = _compiled(schedule)
    kind = schedule.get("type", "immediate")
    if kind == "immediate":
        return ScheduleSql()
    if kind == "at":
        return ScheduleSql(status_expr=f"'{Status.SCHEDULED}'", scheduled_for_expr="%s::timestamptz",
                           publishes=False)
    if kind == "optimal_map":
        return _optimal_sql(schedule)
    if kind == "due_map":
        return ScheduleSql(
            joins="LEFT JOIN jsonb_each_text(%s::jsonb) AS due(tz, due_at) ON due.tz = c.timezone",
            params=[json.dumps(schedule["due"])],
            status_expr=f"'{Status.SCHEDULED}'",
            scheduled_for_expr="COALESCE(due.due_at::timestamptz, %s::timestamptz)",
            publishes=False,
        )
    raise ValueError(f"schedule type {kind!r} has no fan-out SQL yet")


def schedule_expr_params(schedule: dict) -> list[Any]:
    """Parameters of `scheduled_for_expr` (the select list comes before the joins)."""
    schedule = _compiled(schedule)
    if schedule.get("type") == "due_map":
        return [schedule["default"]]
    if schedule.get("type") == "at":
        return [schedule["due"]]
    return []
