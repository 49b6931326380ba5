"""Send one P0/P1 message: the batch path's steps, with no batch bookkeeping for a batch of one.

An OTP is a batch of one (core/priorities.py), and the batch path paid for its generality on
every one: a claim, a load with two joins, a suppression query, a hand-off mark, an attempt
INSERT and a SENT mark, each its own statement (docs/decisions.md 54). Here:

1. claim, load, suppression check and the contact's locale in one UPDATE ... RETURNING
   (asynchronous commit, as every claim: decision 32);
2. render (the template version and its compiled form are cached per process: versions are
   immutable), outside any transaction;
3. the hand-off mark, a statement of its own with a synchronous commit, which also looks at the
   suppression list once more (a bounce may have committed since the claim);
4. the provider call, through the batch path's failover, retry and dead-letter code (breakers,
   rate limits, provider-fault detection);
5. the SENT mark and its attempt row in one statement (asynchronous commit).

The exactly-once argument is the batch path's (decisions 31-32), unchanged: the claim comes
before any work and counts an attempt (a message that kills its worker while rendering runs out
of attempts and is dead-lettered); a crash between claim and hand-off leaves a row that this
task, redelivered with the same id, claims again and sends; only the hand-off mark, committed
synchronously right before the provider call, makes a row AMBIGUOUS after a crash. Claim and
hand-off stay two statements on purpose: merged, a worker dying while rendering would turn an
OTP AMBIGUOUS (held, never sent) instead of being sent by the redelivered task.

The signals the fault tests use (delivery/signals.py) are sent at the same steps as in a batch.
"""

from __future__ import annotations

from functools import partial

from clients.key_types import KeyType
from core.db_outage import hold_through_outage
from delivery import signals
from delivery.models import EmailMessage
from delivery.providers import provider_order
from delivery.providers.base import Outcome, SendResult
from delivery.services import ledger
from delivery.services.dead_letters import messages_dead_letter
from delivery.services.sending import (
    POISON_ERROR,
    BatchReport,
    Recorder,
    attempt_limit,
    hand_off_held,
    render_claimed,
    results_recorder,
    sandbox_send,
    send_with_failover,
)

Status = EmailMessage.Status


def message_send_one(*, message_id: int, token: str) -> BatchReport:
    """Claim, render, hand over and record one message; the report says what to do next."""
    report = BatchReport()
    claimed = ledger.message_claim_for_send(message_id=message_id, token=token)
    if claimed is None:
        return report
    signals.batch_claimed.send(sender=__name__, message_ids=[claimed.id], token=token)
    if not _sendable(claimed, token, report):
        return report
    emails = render_claimed([claimed], token, report)  # [] when it failed to render (FAILED)
    if not emails:
        return report
    if claimed.key_type == KeyType.TEST:  # never offered to a provider (issue 27)
        sandbox_send(emails, token, report, {claimed.id: claimed.attempts})
        return report
    hand_off = hand_off_held(partial(ledger.message_mark_started, message_id=claimed.id, token=token,
                                     provider=provider_order()[0]))
    if hand_off.suppressed:  # suppressed since the claim read it (F17): SUPPRESSED, not sent
        report.suppressed += 1
        return report
    if not hand_off.started:
        report.republish_ids = [claimed.id]  # its claim was lost or taken back: see BatchReport
        return report
    send_with_failover(emails, token, report, {claimed.id: claimed.attempts},
                       record=_recorder(token, report))
    return report


def _sendable(claimed: ledger.ClaimedMessage, token: str, report: BatchReport) -> bool:
    """Poison guard and suppression at send, as the batch path's `_guard` and `_drop_suppressed`."""
    if claimed.attempts > attempt_limit(claimed.priority):
        report.dead_lettered += messages_dead_letter(message_ids=[claimed.id], token=token,
                                                     error=POISON_ERROR)
        return False
    if claimed.suppressed:
        report.suppressed += ledger.messages_mark_final(
            message_ids=[claimed.id], token=token, status=Status.SUPPRESSED, error="suppressed"
        )
        return False
    return True


def _recorder(token: str, report: BatchReport) -> Recorder:
    """The batch path's recorder, but an acceptance is the SENT mark and its attempt row in
    one statement, held through a database outage like the batch path's writes."""
    others = results_recorder(token, report)

    def record(name: str, results: list[SendResult]) -> None:
        rest = []
        for result in results:
            if result.outcome is not Outcome.ACCEPTED:
                rest.append(result)
                continue
            report.count_sent(name, hold_through_outage(partial(
                ledger.message_mark_sent_with_attempt,
                message_id=result.message_id, token=token, provider=name,
                provider_message_id=result.provider_message_id, response_code=result.response_code,
                duration_ms=result.duration_ms,
            ), what=f"recording {name}'s answer"))
        report.count_calls(name, [result for result in results if result.outcome is Outcome.ACCEPTED])
        if rest:
            others(name, rest)

    return record
