"""Sends handed over long ago with no recorded answer, settled from their send journal.

The recovery loop runs this for rows SENDING with a hand-off older than
NOTIFIER_AMBIGUOUS_AFTER_SECONDS: their worker was lost mid-call (or is stuck). Per claim
token it closes the batch's journal (delivery/services/send_journal.py, decision 92) and:

- a message the journal shows accepted is SENT, with the provider's message id;
- a message the journal shows never started (or refused before acceptance) provably never
  left: back to QUEUED and published again at once;
- a message started and unanswered, and every row of a batch with no journal (an HTTP batch is
  one request; Redis lost it), is AMBIGUOUS, logged with why (delivery/services/ambiguity.py
  settles it from the ESP's evidence).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from redis.exceptions import RedisError

from delivery.models import AmbiguityRecord, EmailMessage
from delivery.providers.base import Outcome
from delivery.services import ledger
from delivery.services.ambiguity import ambiguity_held
from delivery.services.dispatch import messages_enqueue_by_priority
from delivery.services.send_journal import JournalRead, journal_close

logger = logging.getLogger(__name__)
Row = tuple[int, str, str, int]  # id, claim token, provider, priority
NOT_STARTED_ERROR = "not sent: its worker was lost before it (send journal)"


@dataclass
class StalledReport:
    sent: int = 0
    released: int = 0
    ambiguous: int = 0


def stalled_sends_settle(*, started_before: datetime) -> StalledReport:
    report = StalledReport()
    by_token: dict[str, list[Row]] = defaultdict(list)
    for row in ledger.stalled_sends_read(started_before=started_before):
        by_token[row[1]].append(row)
    for token, rows in by_token.items():
        _settle_batch(token, rows, report)
    return report


def _journal(token: str) -> JournalRead:
    try:
        return journal_close(token)
    except RedisError:  # no proof either way: held, as a batch with no journal
        logger.warning("send journal unreadable; holding the batch", exc_info=True)
        return JournalRead()


def _settle_batch(token: str, rows: Sequence[Row], report: StalledReport) -> None:
    journal = _journal(token)
    sent: dict[str, dict[int, str]] = defaultdict(dict)
    released: list[Row] = []
    held: list[Row] = []
    for row in rows:
        pk, answer = row[0], journal.answers.get(row[0])
        if journal.opened and answer is not None and answer[0] is Outcome.ACCEPTED:
            sent[row[2]][pk] = answer[1]
        elif journal.opened and (pk not in journal.started or _refused(answer)):
            released.append(row)
        else:
            held.append(row)
    with transaction.atomic():
        for provider, provider_ids in sent.items():
            report.sent += ledger.messages_mark_sent(provider_ids=provider_ids, provider=provider,
                                                     token=token, remember=False)
        report.released += _release(released, token)
        report.ambiguous += _hold(held, token)


def _refused(answer: tuple[Outcome, str] | None) -> bool:
    """An answer that proves the provider did not take it (refused before acceptance)."""
    return answer is not None and answer[0] is Outcome.TRANSIENT


def _release(rows: list[Row], token: str) -> int:
    if not rows:
        return 0
    ids = [row[0] for row in rows]
    changed = ledger.messages_release(message_ids=ids, token=token, error=NOT_STARTED_ERROR)
    AmbiguityRecord.objects.bulk_create([
        AmbiguityRecord(message_id=pk, kind=AmbiguityRecord.Kind.REQUEUED, reason="never_started",
                        provider=provider, evidence={"send_journal": token})
        for pk, _, provider, _ in rows])
    transaction.on_commit(lambda: messages_enqueue_by_priority([(row[0], row[3]) for row in rows]))
    return changed


def _hold(rows: list[Row], token: str) -> int:
    if not rows:
        return 0
    changed = ledger.messages_mark_final(message_ids=[row[0] for row in rows], token=token,
                                         status=EmailMessage.Status.AMBIGUOUS,
                                         error="no provider answer recorded; awaiting reconciliation")
    ambiguity_held(rows=[(row[0], row[2]) for row in rows], reason="worker_lost")
    return changed
