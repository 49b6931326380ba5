"""Writes on contacts, lists and suppressions.

Bulk writes go to PostgreSQL as one JSON document expanded by jsonb_to_recordset inside an
INSERT ... ON CONFLICT, so 10,000 contacts are one statement, not 10,000 ORM saves. Emails are
stored lower-cased everywhere (contacts and suppressions), so the fan-out's joins are exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import connection, transaction

from audience.models import Contact, ContactList, Suppression
from audience.validation import CONTACT_FIELDS, contact_row_clean
from clients.tenancy import owned

MAX_BULK = 10_000
CONTACT_TABLE = Contact._meta.db_table
MEMBER_TABLE = ContactList.contacts.through._meta.db_table

# Fields a row leaves out keep their stored value on update (COALESCE with EXCLUDED's NULL);
# attributes are merged key by key.
_UPSERT_SQL = f"""
INSERT INTO {CONTACT_TABLE} (client_id, email, name, timezone, locale, attributes, subscribed, created_at,
                             updated_at)
SELECT %s, r.email, COALESCE(r.name, ''), COALESCE(r.timezone, ''), COALESCE(r.locale, ''),
       COALESCE(r.attributes, '{{}}'::jsonb), COALESCE(r.subscribed, TRUE), now(), now()
FROM jsonb_to_recordset(%s::jsonb)
     AS r(email text, name text, timezone text, locale text, attributes jsonb, subscribed boolean)
ON CONFLICT (client_id, email) DO UPDATE SET
  name = CASE WHEN %s::jsonb -> EXCLUDED.email ? 'name' THEN EXCLUDED.name ELSE {CONTACT_TABLE}.name END,
  timezone = CASE WHEN %s::jsonb -> EXCLUDED.email ? 'timezone' THEN EXCLUDED.timezone
                  ELSE {CONTACT_TABLE}.timezone END,
  locale = CASE WHEN %s::jsonb -> EXCLUDED.email ? 'locale' THEN EXCLUDED.locale
                ELSE {CONTACT_TABLE}.locale END,
  subscribed = CASE WHEN %s::jsonb -> EXCLUDED.email ? 'subscribed' THEN EXCLUDED.subscribed
                    ELSE {CONTACT_TABLE}.subscribed END,
  attributes = {CONTACT_TABLE}.attributes || EXCLUDED.attributes,
  updated_at = now()
RETURNING id, (xmax = 0) AS inserted
"""


@dataclass
class BulkResult:
    created: int = 0
    updated: int = 0
    errors: list[dict] = field(default_factory=list)
    contact_ids: list[int] = field(default_factory=list)


def contacts_bulk_upsert(*, client_id: str, rows: list, list_id: int | None = None) -> BulkResult:
    """Upsert the valid rows as the client's contacts (and add them to the client's list `list_id`);
    report invalid rows by index."""
    result = BulkResult()
    cleaned: dict[str, dict] = {}
    for index, row in enumerate(rows):
        clean, errors = contact_row_clean(row, allow=CONTACT_FIELDS - {"data"})
        if errors:
            email = row.get("email") if isinstance(row, dict) else None
            result.errors.append({"index": index, "email": email, "errors": errors})
        else:
            cleaned[clean["email"]] = clean  # a repeated email in one call: the last row wins
    if not cleaned:
        return result
    with transaction.atomic(), connection.cursor() as cursor:
        present = json.dumps({email: dict.fromkeys(row, True) for email, row in cleaned.items()})
        cursor.execute(_UPSERT_SQL, [client_id, json.dumps(list(cleaned.values())), *[present] * 4])
        rows = cursor.fetchall()
        for contact_id, inserted in rows:
            result.contact_ids.append(contact_id)
            result.created += int(inserted)
            result.updated += int(not inserted)
        if list_id is not None:
            list_members_add(list_id=list_id, contact_ids=result.contact_ids)
    return result


def list_members_add(*, list_id: int, contact_ids: list[int]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {MEMBER_TABLE} (contactlist_id, contact_id) "
            "SELECT %s, unnest(%s::bigint[]) ON CONFLICT DO NOTHING",
            [list_id, contact_ids],
        )
        return cursor.rowcount


def contact_list_get_or_create(*, client_id: str, name: str) -> ContactList:
    return ContactList.objects.get_or_create(client_id=client_id, name=name)[0]


def suppression_create(
    *, email: str, reason: str, source: str = "api", client_id: str | None = None, sandbox: bool = False
) -> tuple[Suppression, bool]:
    """Suppress an address on behalf of `client_id` (who caused it); an existing row is kept.
    `sandbox`: in the test keys' scope (issue 27), which stops test sends only."""
    return Suppression.objects.get_or_create(
        email=email.strip().lower(), sandbox=sandbox,
        defaults={"reason": reason, "source": source, "client_id": client_id},
    )


def suppression_delete(*, email: str, client: object, sandbox: bool = False) -> bool:
    """Remove a suppression the client caused (any, with the admin scope), of the live scope
    or (`sandbox`) the test keys'."""
    rows = owned(Suppression.objects.filter(email=email.strip().lower(), sandbox=sandbox), client)
    deleted, _ = rows.delete()
    return bool(deleted)


def audience_statistics_refresh() -> None:
    """ANALYZE the contact and list-membership tables after a bulk load.

    Autovacuum analyzes a table only once ~10% of it has changed, on its own schedule. A campaign
    launched right after a million-row load planned its first fan-out chunk on empty statistics
    and that one chunk ran for over a minute (the million-day run); after ANALYZE each chunk of
    1,000 takes tens of milliseconds.
    """
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {CONTACT_TABLE}, {MEMBER_TABLE}")
