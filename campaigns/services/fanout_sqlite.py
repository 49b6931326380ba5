"""The fan-out chunk for SQLite (the embedded first-run default), in two statements.

SQLite has no data-modifying CTE, so a chunk is a keyset SELECT of (contact id, eligible) and an
INSERT ... SELECT ... ON CONFLICT DO NOTHING RETURNING over the eligible ids: still one round
trip per 1000 contacts and no ORM object per recipient. Only immediate schedules (the
scheduling hook's SQL is PostgreSQL's).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from campaigns.audience import CONTACT_TABLE, audience_sql
from campaigns.models import Campaign, Suppression
from delivery.models import EmailMessage

MESSAGE_TABLE = EmailMessage._meta.db_table
SUPPRESSION_TABLE = Suppression._meta.db_table
CHUNK_SIZE = 1000


def sqlite_chunk_runner(campaign: Campaign, insert_columns: Callable) -> Callable[[int], tuple]:
    if (campaign.schedule or {}).get("type", "immediate") != "immediate":
        raise ValueError("scheduled campaigns need PostgreSQL")
    audience = audience_sql(campaign.audience, campaign_id=campaign.id)
    context = (
        "json_patch(json_patch(c.attributes, json_object('email', c.email, 'name', c.name, "
        f"'timezone', c.timezone, 'locale', c.locale)), {audience.data_expr})"
    )
    columns, exprs, insert_params = insert_columns(campaign, campaign.schedule, context)
    exprs = [e.replace("NULL::timestamptz", "NULL") for e in exprs]
    join_params = audience.params if audience.joins else []  # segments have a condition, no join
    scan = (
        f"SELECT c.id, (c.subscribed AND NOT EXISTS (SELECT 1 FROM {SUPPRESSION_TABLE} x "
        f"WHERE x.email = c.email)) FROM {CONTACT_TABLE} c {audience.joins} "
        f"WHERE {audience.where} AND c.id > %s ORDER BY c.id LIMIT %s"
    )

    def run(cursor_id: int) -> tuple:
        with connection.cursor() as cursor:
            cursor.execute(scan, [*audience.params, cursor_id, CHUNK_SIZE])
            rows = cursor.fetchall()
            if not rows:
                return None, 0, 0, [], []
            eligible = [contact_id for contact_id, ok in rows if ok]
            queued: list[int] = []
            if eligible:
                marks = ", ".join(["%s"] * len(eligible))
                cursor.execute(
                    f"INSERT INTO {MESSAGE_TABLE} ({', '.join(columns)}) SELECT {', '.join(exprs)} "
                    f"FROM {CONTACT_TABLE} c {audience.joins} WHERE c.id IN ({marks}) "
                    "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
                    [*insert_params, *join_params, *eligible],
                )
                queued = sorted(row[0] for row in cursor.fetchall())
            return rows[-1][0], len(rows), len(eligible), queued, []

    return run
