"""One message changed by an operator from the admin (requeues and reconciliations are in
`requeues`): a message cancelled before it leaves. It names the states it may move from, so it
races safely with the send path."""

from __future__ import annotations

from django.db import connection

from delivery.services.ledger.sql import TABLE, UNSENT, Status, unsent_params


def message_unsent_cancel(*, message_id: int, reason: str) -> bool:
    """A message not yet handed to a provider (queued, scheduled, or claimed and not handed
    over) -> CANCELLED; False if it had left or ended already.

    A worker holding its claim finds its token gone at the hand-off mark and skips it; the
    dispatcher's fence moves only SCHEDULED rows, so a cancelled id left in the due set is
    dropped there. The condition is the one a campaign's cancel uses (`UNSENT`), re-checked by
    PostgreSQL on the row's new version when a hand-off commits while this waits for its lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL, error = %s "
            f"WHERE id = %s AND {UNSENT} RETURNING id",
            [Status.CANCELLED, reason[:2000], message_id, *unsent_params()],
        )
        return cursor.fetchone() is not None
