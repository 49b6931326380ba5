"""One fan-out per campaign at a time: a PostgreSQL session advisory lock on the campaign."""

from __future__ import annotations

from django.db import connection

LOCK_NAMESPACE = 7301  # pg advisory lock (namespace, campaign id): one fan-out per campaign


def campaign_lock(campaign_id: int, *, wait: bool) -> bool:
    """A PostgreSQL session advisory lock on the campaign (True when held)."""
    function = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [LOCK_NAMESPACE, campaign_id])
        return wait or bool(cursor.fetchone()[0])


def campaign_unlock(campaign_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, campaign_id])
