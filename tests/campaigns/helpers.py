"""Helpers for campaign tests: contacts written in one statement, counters, waits."""

from __future__ import annotations

import time

from django.db import connection

from campaigns.models import Contact


def contacts_create(n: int, *, prefix: str = "user", domain: str = "example.com", start: int = 0,
                    attributes_sql: str = "jsonb_build_object('n', g)") -> None:
    """n contacts user<i>@example.com in one INSERT ... SELECT generate_series."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Contact._meta.db_table} (email, name, timezone, locale, attributes, "
            "subscribed, created_at, updated_at) "
            f"SELECT %s || g || '@' || %s, 'User ' || g, 'Europe/Paris', 'en', {attributes_sql}, TRUE, "
            "now(), now() FROM generate_series(%s, %s) AS g",
            [prefix, domain, start, start + n - 1],
        )


def wait_for(predicate, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
