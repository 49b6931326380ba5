"""A campaign's audience as SQL over the contact table (aliased `c`).

`audience_sql(audience)` returns the FROM/JOIN text and WHERE condition for one of the three
recipient types, so the fan-out can walk the audience by contact id in keyset chunks and the
API can ask "is it empty?" without counting a million rows.

    segment  {"type": "segment", "segment_id": 7, "definition": {...snapshot...}}
    list     {"type": "list", "list_id": 3}
    inline   {"type": "inline", "contacts": [{"email", "name", "timezone", "data"}, ...]}

Each snapshot also carries `client_id`, set by the validation from the launching client: the
audience is only that client's contacts (decision 50).

Inline contacts are upserted as contacts by the fan-out first; their per-recipient `data` is
read back from the campaign row with jsonb_to_recordset, so no recipient passes through Python.
"""

from __future__ import annotations

from django.db import connection

from audience.query import (
    CONTACT_TABLE,
    OWNER_WHERE,
    AudienceSql,
    contacts_exist,
    list_sql,
    segment_sql,
)
from campaigns.models import Campaign

CAMPAIGN_TABLE = Campaign._meta.db_table


def audience_sql(audience: dict, *, campaign_id: int | None = None) -> AudienceSql:
    kind = audience.get("type")
    client_id = audience["client_id"]
    if kind == "segment":
        return segment_sql(audience["definition"], client_id=client_id)
    if kind == "list":
        return list_sql(audience["list_id"], client_id=client_id)
    if kind == "inline":
        return _inline_sql(campaign_id, client_id)
    raise ValueError(f"unknown audience type {kind!r}")


def _inline_sql(campaign_id: int | None, client_id: str) -> AudienceSql:
    # Validated and de-duplicated (lower-cased emails) by the API before it was stored.
    joins = (
        f"JOIN (SELECT i.email, i.data FROM {CAMPAIGN_TABLE} cc, "
        "jsonb_to_recordset(cc.audience -> 'contacts') AS i(email text, data jsonb) "
        "WHERE cc.id = %s) inl ON inl.email = c.email"
    )
    return AudienceSql(joins=joins, where=OWNER_WHERE, params=[campaign_id, client_id],
                       data_expr="COALESCE(inl.data, '{}'::jsonb)")


def audience_is_empty(audience: dict) -> bool:
    """One indexed probe (LIMIT 1), not a count: the API answers in milliseconds."""
    if audience.get("type") == "inline":
        return not audience.get("contacts")
    return not contacts_exist(audience_sql(audience))


def audience_count(audience: dict, *, campaign_id: int) -> int:
    """Contacts the audience resolves to now, excluded ones included: one COUNT over the same
    SQL the fan-out walks (an index-only scan for a list), run once per campaign."""
    if audience.get("type") == "inline":
        return len(audience.get("contacts") or [])  # de-duplicated by the API before it was stored
    sql = audience_sql(audience, campaign_id=campaign_id)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {CONTACT_TABLE} c {sql.joins} WHERE {sql.where}", sql.params)
        return int(cursor.fetchone()[0])


def inline_contacts_upsert(*, campaign_id: int) -> int:
    """Create the inline recipients as the campaign's client's contacts (existing contacts are left
    as they are)."""
    sql = (
        f"INSERT INTO {CONTACT_TABLE} (client_id, email, name, timezone, locale, attributes, "
        "subscribed, created_at, updated_at) "
        "SELECT cc.audience ->> 'client_id', i.email, COALESCE(i.name, ''), COALESCE(i.timezone, ''), "
        "'', '{}'::jsonb, TRUE, "
        f"now(), now() FROM {CAMPAIGN_TABLE} cc, "
        "jsonb_to_recordset(cc.audience -> 'contacts') AS i(email text, name text, timezone text) "
        "WHERE cc.id = %s ON CONFLICT (client_id, email) DO NOTHING"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [campaign_id])
        return cursor.rowcount
