"""How the fan-out sets each message row's status and due time: the scheduling hook.

Today a campaign's schedule is `{"type": "immediate"}`: rows are written QUEUED and published
at once. The scheduling engine adds other schedule types by returning a `ScheduleSql` for them
from `schedule_sql()`: rows are then written SCHEDULED with a per-recipient `scheduled_for`
computed in SQL, and the fan-out publishes nothing for them (the scheduler dispatches them at
their due time). One ready-made shape is the "due map" (time zone -> due instant), joined on the
contact's time zone, with a default for contacts whose zone is missing from the map::

    {"type": "due_map", "due": {"Europe/Paris": "2026-12-01T08:00:00+00:00", ...},
     "default": "2026-12-01T09:00:00+00:00"}

which is what "9:00 in each recipient's local time" compiles to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from delivery.models import EmailMessage

Status = EmailMessage.Status


@dataclass(frozen=True)
class ScheduleSql:
    joins: str = ""
    params: list[Any] = field(default_factory=list)
    status_expr: str = f"'{Status.QUEUED}'"
    scheduled_for_expr: str = "NULL::timestamptz"
    # True when rows are written QUEUED and must be published by the fan-out.
    publishes: bool = True


def schedule_sql(schedule: dict) -> ScheduleSql:
    kind = (schedule or {}).get("type", "immediate")
    if kind == "immediate":
        return ScheduleSql()
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
    """Parameters of `scheduled_for_expr` (after the joins' parameters)."""
    if (schedule or {}).get("type") == "due_map":
        return [schedule["default"]]
    return []
