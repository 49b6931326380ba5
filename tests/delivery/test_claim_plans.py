"""Statements that name their rows by id are driven by the primary key, whatever the statistics
of `status` say (decision 67): a campaign makes rows QUEUED faster than autoanalyze notices."""

import pytest
from django.db import connection

from delivery.models import EmailMessage
from delivery.services import ledger
from tests.factories import email_message, template_version

pytestmark = pytest.mark.django_db
TABLE = EmailMessage._meta.db_table
STATUS_INDEX = "msg_status_claimed_idx"


@pytest.fixture
def queued_ids_behind_stale_statistics() -> list[int]:
    """5,000 rows analyzed while SENT (the steady state), then made QUEUED, as a campaign does."""
    template = email_message(version=template_version())
    columns = [f.column for f in EmailMessage._meta.concrete_fields if f.column != "id"]
    listed = ", ".join(columns)
    copied = listed.replace("idempotency_key", "idempotency_key || g")  # unique per copy
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} ({listed}) SELECT {copied} "
            f"FROM {TABLE}, generate_series(1, 5000) g WHERE id = %s",
            [template.id],
        )
        cursor.execute(f"UPDATE {TABLE} SET status = 'SENT'")
        cursor.execute(f"ANALYZE {TABLE}")
        cursor.execute(f"UPDATE {TABLE} SET status = 'QUEUED' RETURNING id")
        return sorted(row[0] for row in cursor.fetchall())[:500]


def _plans_of(call) -> list[str]:
    """EXPLAIN of every statement `call` runs (captured as it runs, then explained)."""
    statements: list[tuple[str, object]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    plans = []
    with connection.cursor() as cursor:
        for sql, params in statements:
            if sql.lstrip().upper().startswith(("UPDATE", "SELECT")):
                cursor.execute(f"EXPLAIN {sql}", params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans


@pytest.mark.parametrize("claim", ["messages_claim", "messages_claim_hand_off"])
def test_a_batch_claim_walks_its_own_ids_not_every_queued_row(claim, queued_ids_behind_stale_statistics):
    ids = queued_ids_behind_stale_statistics
    plans = _plans_of(lambda: getattr(ledger, claim)(message_ids=ids, token="plan-check"))
    assert plans, "the claim ran no statement"
    for plan in plans:
        assert STATUS_INDEX not in plan, plan
        assert "_pkey" in plan, plan
