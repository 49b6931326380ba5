"""Writes on contacts, lists and suppressions.

Bulk writes go to PostgreSQL as one JSON document expanded by jsonb_to_recordset inside an
INSERT ... ON CONFLICT, so 10,000 contacts are one statement, not 10,000 ORM saves. Emails are
stored lower-cased everywhere (contacts and suppressions), so the fan-out's joins are exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import connection, transaction

from audience.models import ConsentChange, Contact, ContactList, Suppression
from audience.services.consent import (
    ConsentRefusedError,
    ConsentSubject,
    broadcast_resubscribe,
    broadcast_unsubscribe,
)
from audience.services.topic_choices import everywhere_suppressed, topic_choices_apply
from audience.topics import topic_unknown_message, topics_by_reference
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
_CHOICES_SQL = ("SELECT c.email, c.topic_id, c.subscribed FROM jsonb_to_recordset(%s::jsonb) "
                "AS c(email text, topic_id bigint, subscribed boolean)")


@dataclass
class BulkResult:
    created: int = 0
    updated: int = 0
    errors: list[dict] = field(default_factory=list)
    contact_ids: list[int] = field(default_factory=list)


def contacts_bulk_upsert(*, client_id: str, rows: list, list_id: int | None = None) -> BulkResult:
    """Upsert the valid rows as the client's contacts (and add them to the client's list `list_id`)
    and apply their topic choices (source import); report invalid rows by index."""
    result = BulkResult()
    cleaned: dict[str, dict] = {}
    indexes: dict[str, int] = {}
    for index, row in enumerate(rows):
        clean, errors = contact_row_clean(row, allow=CONTACT_FIELDS - {"data"})
        if errors:
            _row_refused(result, index, row, errors)
        else:
            cleaned[clean["email"]] = clean  # a repeated email in one call: the last row wins
            indexes[clean["email"]] = index
    choices = _topic_choices_resolve(client_id, cleaned, indexes, result)
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
        if choices:
            topic_choices_apply(cursor, service_id=client_id, choices_sql=_CHOICES_SQL,
                                params=[json.dumps(choices)], source=ConsentChange.Source.IMPORT)
    result.errors.sort(key=lambda error: error["index"])
    return result


def _row_refused(result: BulkResult, index: int, row: object, errors: dict) -> None:
    email = row.get("email") if isinstance(row, dict) else None
    result.errors.append({"index": index, "email": email, "errors": errors})


def _topic_choices_resolve(client_id: str, cleaned: dict[str, dict], indexes: dict[str, int],
                           result: BulkResult) -> list[dict]:
    """The rows' topic choices as [{email, topic_id, subscribed}]; a row naming a topic the
    service does not have (or archived), or joining one for an address suppressed for every
    stream, is refused whole (removed from `cleaned`, reported by index). Rows without
    choices cost nothing: no query when no row has any."""
    with_topics = {email: row.pop("topics") for email, row in cleaned.items() if "topics" in row}
    if not any(with_topics.values()):
        return []
    topics = topics_by_reference(service_id=client_id,
                                 references={key for choices in with_topics.values() for key in choices})
    joining = [email for email, choices in with_topics.items() if any(choices.values())]
    suppressed = everywhere_suppressed(joining)
    resolved: list[dict] = []
    for email, choices in with_topics.items():
        errors = {f"topics.{key}": [topic_unknown_message(key)] for key in choices if topics[key] is None}
        if email in suppressed and not errors:
            errors = {f"topics.{key}": [str(ConsentRefusedError(suppressed[email]))]
                      for key, subscribed in choices.items() if subscribed}
        if errors:
            _row_refused(result, indexes[email], cleaned.pop(email), errors)
            continue
        # Two keys naming one topic (its id and its name): the later one wins, as for rows.
        by_topic = {topics[key].pk: subscribed for key, subscribed in choices.items()}
        resolved += [{"email": email, "topic_id": topic_id, "subscribed": subscribed}
                     for topic_id, subscribed in by_topic.items()]
    return resolved


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
    """Suppress an address for every stream on behalf of `client_id` (who caused it); an existing
    all-streams row is kept. `sandbox`: in the test keys' scope (issue 27), which stops test sends
    only. (A service's broadcast-scope row is an unsubscribe: audience.services.consent.)"""
    return Suppression.objects.get_or_create(
        email=email.strip().lower(), sandbox=sandbox, scope=Suppression.Scope.ALL,
        defaults={"reason": reason, "source": source, "client_id": client_id},
    )


def broadcast_suppression_create(*, email: str, service_id: str) -> tuple[Suppression, bool]:
    """The service's API unsubscribes the address from its broadcast stream (recorded, source api);
    True when this call did it, False when it had left already."""
    subject = ConsentSubject.of(service_id, email)
    added = broadcast_unsubscribe(subject=subject, source=ConsentChange.Source.API)
    row = Suppression.objects.get(email=subject.email, client_id=service_id, sandbox=False,
                                  scope=Suppression.Scope.BROADCAST)
    return row, added


def suppression_delete(
    *, email: str, client: object, sandbox: bool = False, scope: str | None = None
) -> bool:
    """Remove the suppressions of the address the client caused (any, with the admin scope), of
    the live scope or (`sandbox`) the test keys', in `scope` (None: both). Removing a live
    broadcast-scope row is the recipient's return to that service's broadcast stream, recorded
    (source api) and refused (ConsentRefusedError, nothing removed) while the address is
    suppressed for every stream. All or nothing."""
    rows = owned(Suppression.objects.filter(email=email.strip().lower(), sandbox=sandbox), client)
    if scope is not None:
        rows = rows.filter(scope=scope)
    with transaction.atomic():
        found = list(rows.select_for_update().order_by("id"))
        every_stream = [row.pk for row in found if row.scope == Suppression.Scope.ALL]
        Suppression.objects.filter(pk__in=every_stream).delete()
        for row in found:
            if row.scope == Suppression.Scope.BROADCAST:
                _broadcast_row_delete(row)
    return bool(found)


def _broadcast_row_delete(row: Suppression) -> None:
    if row.sandbox:  # a test key's unsubscribe: no consent history of its own
        row.delete()
        return
    broadcast_resubscribe(subject=ConsentSubject.of(row.client_id, row.email),
                          source=ConsentChange.Source.API)


def audience_statistics_refresh() -> None:
    """ANALYZE the contact and list-membership tables after a bulk load.

    Autovacuum analyzes a table only once ~10% of it has changed, on its own schedule. A campaign
    launched right after a million-row load planned its first fan-out chunk on empty statistics
    and that one chunk ran for over a minute (the million-day run); after ANALYZE each chunk of
    1,000 takes tens of milliseconds.
    """
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {CONTACT_TABLE}, {MEMBER_TABLE}")
