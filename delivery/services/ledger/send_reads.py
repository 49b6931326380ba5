"""Rows as a send reads them (`ClaimedMessage`): a bulk batch's QUEUED rows read before their
claim, and a batch's claim that returns its rows, each in one prepared statement. A campaign
row's contact is read here, under the row's own data (docs/decisions.md 65)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection
from django.utils import timezone

from audience.models import Contact, Stream
from audience.selectors import contact_merge_data_sql, message_withheld_sql
from clients.key_types import KeyType
from delivery.extensions import claim_guard_sql
from delivery.services.ledger.prepared import execute_prepared
from delivery.services.ledger.sql import (
    MINE_NOT_HANDED_OVER,
    QUEUED_OR_MINE,
    TABLE,
    Status,
    ids_in,
    ids_params,
    message_is_test_sql,
    status_is,
)


@dataclass(frozen=True, slots=True)
class ClaimedMessage:
    """A row to send, with what sending it needs (read in the claim's round trip, or by
    `messages_queued_read_for_send` for a bulk batch): plain values, no model instance (~20 us a row less)."""

    id: int
    attempts: int
    priority: int
    recipient: str
    context: dict
    template_version_id: int
    campaign_id: int | None
    contact_id: int | None
    suppressed: bool
    locale: str
    contact_gone: bool = False
    key_type: str = KeyType.LIVE  # a test key's row is settled by the sandbox (issue 27)
    # Its service, stream and topic (issue 28): what its one-click and preference links name.
    client_id: str | None = None
    stream: str = Stream.TRANSACTIONAL
    topic_id: int | None = None


CONTACT_TABLE = Contact._meta.db_table
CONTACT_GONE_ERROR = "contact deleted"
# A campaign row whose contact was deleted after the fan-out (the LEFT JOIN found none).
CONTACT_GONE = f"({TABLE}.campaign_id IS NOT NULL AND {TABLE}.contact_id IS NOT NULL AND c.id IS NULL)"


def send_rows_sql(source: str, *, suppressed: str, where: str = "") -> str:
    """SELECT the columns a send reads (ClaimedMessage's order) from `source` (the table, or a
    claim's CTE), named as the message table, LEFT JOINed once to each row's contact. A campaign
    row carries only its audience's own data (the inline audience's per-recipient values, else
    {}): the contact's is read now, under it, in the order the fan-out used to copy it
    (docs/decisions.md 65). Other rows render their own context. `suppressed`: SQL of the
    column that says the row must not be sent."""
    context = (
        f"CASE WHEN {TABLE}.campaign_id IS NULL THEN {TABLE}.context "
        f"ELSE COALESCE({contact_merge_data_sql('c')}, '{{}}'::jsonb) || {TABLE}.context END"
    )
    return (
        f"SELECT {TABLE}.id, {TABLE}.attempts, {TABLE}.priority, {TABLE}.recipient, {context}, "
        f"{TABLE}.template_version_id, {TABLE}.campaign_id, {TABLE}.contact_id, {suppressed}, "
        f"COALESCE(c.locale, ''), {CONTACT_GONE}, {TABLE}.key_type, "
        f"{TABLE}.client_id, {TABLE}.stream, {TABLE}.topic_id "
        f"FROM {source} AS {TABLE} LEFT JOIN {CONTACT_TABLE} c ON c.id = {TABLE}.contact_id {where}"
    )


def claimed_message(row: Sequence) -> ClaimedMessage:
    context = json.loads(row[4]) if isinstance(row[4], str) else row[4]
    return ClaimedMessage(row[0], row[1], row[2], row[3], context or {}, row[5], row[6], row[7],
                          bool(row[8]), row[9] or "", bool(row[10]), row[11], row[12], row[13], row[14])


def messages_queued_read_for_send(*, message_ids: Sequence[int]) -> list[ClaimedMessage]:
    """The rows of a batch still QUEUED, as a send needs them, read before their claim (a bulk
    batch, decision 59), in one prepared statement (a LEFT JOIN reads each row's contact: its
    locale, and a campaign row's merge data). The claim re-checks suppression itself
    (`messages_claim_hand_off`): `suppressed` is left False here."""
    if not message_ids:
        return []
    sql = send_rows_sql(TABLE, suppressed="FALSE",
                        where=f"WHERE {ids_in(f'{TABLE}.id')} AND {status_is(f'{TABLE}.status')} "
                              f"ORDER BY {TABLE}.id")
    with connection.cursor() as cursor:
        execute_prepared(cursor, "send_rows", sql, [*ids_params(message_ids), Status.QUEUED], flush_wait=True)
        return [claimed_message(row) for row in cursor.fetchall()]


def claim_cte(rows: str) -> str:
    """`messages_claim`'s UPDATE as a CTE named `claimed` of the rows `rows` picks (SQL whose
    placeholders follow the SET's three), under the registered claim guards."""
    return (
        f"WITH claimed AS (UPDATE {TABLE} SET status = %s, claim_token = %s, claimed_at = %s, "
        f"attempts = attempts + 1 WHERE {rows} AND {claim_guard_sql()} RETURNING *) "
    )


def messages_claim_for_send(*, message_ids: Sequence[int], token: str) -> list[ClaimedMessage]:
    """`messages_claim` returning the rows as a send reads them (attempts as counted by this
    claim), in one prepared statement instead of a claim and a read (a P2 batch, claimed before
    it renders). Committed without waiting for the WAL flush, like the claim (decision 32).

    A batch that finds a row of its own SENDING and not handed over claims nothing: it is this
    very task redelivered after its worker died mid-batch (Celery keeps the id), and the caller
    splits it (`sending._split`). One row is re-taken instead, as `messages_claim` does.
    """
    if not message_ids:
        return []
    ids = list(message_ids)
    if len(ids) > 1:
        mine = f"EXISTS (SELECT 1 FROM {TABLE} WHERE {ids_in()} AND {MINE_NOT_HANDED_OVER})"
        rows = f"{ids_in()} AND {status_is()} AND NOT {mine}"
        params = [*ids_params(ids), Status.QUEUED, *ids_params(ids)]
    else:
        rows, params = f"{ids_in()} AND {QUEUED_OR_MINE}", [*ids_params(ids), Status.QUEUED]
    suppressed = message_withheld_sql(TABLE, message_is_test_sql(TABLE))
    sql = claim_cte(rows) + send_rows_sql("claimed", suppressed=suppressed, where=f"ORDER BY {TABLE}.id")
    params = [Status.SENDING, token, timezone.now(), *params, Status.SENDING, token]
    with connection.cursor() as cursor:
        execute_prepared(cursor, "batch_claim", sql, params, flush_wait=False)
        return [claimed_message(row) for row in cursor.fetchall()]
