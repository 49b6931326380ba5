"""Helpers for campaign tests: contacts written in one statement, waits."""

from __future__ import annotations

import json

from django.db import connection
from django.utils import timezone

from audience.models import Contact
from campaigns.services.fanout_marks import fanout_marks_key
from core.redis_client import get_redis
from tests import factories


def contacts_create(n: int, *, prefix: str = "user", domain: str = "example.com", start: int = 0,
                    attributes: dict | None = None, client_id: str | None = None) -> None:
    """n contacts <prefix><i>@<domain> (attributes plus {"n": i}) in one INSERT ... SELECT, owned
    by `client_id` (default: factories.owner())."""
    now = Contact._meta.get_field("created_at").get_db_prep_save(timezone.now(), connection)
    attrs = "%s::jsonb || jsonb_build_object('n', x)"
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE g(x) AS (SELECT %s UNION ALL SELECT x + 1 FROM g WHERE x < %s) "
            f"INSERT INTO {Contact._meta.db_table} (client_id, email, name, timezone, locale, attributes, "
            f"subscribed, created_at, updated_at) SELECT %s, %s || x || '@' || %s, 'User ' || x, "
            f"'Europe/Paris', 'en', {attrs}, TRUE, %s, %s FROM g",
            [start, start + n - 1, client_id or factories.owner().pk, prefix, domain,
             json.dumps(attributes or {}), now, now],
        )


def fanout_marks_replace(campaign_id: int, marks: dict[str, int]) -> None:
    """The fan-out's publish marks become `marks` ({}: as if no chunk's publish was recorded)."""
    get_redis().delete(fanout_marks_key(campaign_id))
    if marks:
        get_redis().hset(fanout_marks_key(campaign_id), mapping=marks)
