"""Send one P0/P1 message: the batch path's steps, with no batch bookkeeping for a batch of one.

An OTP is a batch of one (core/priorities.py), and the batch path paid for its generality on
every one: a claim, a load with two joins, a suppression query, a hand-off mark, an attempt
INSERT and a SENT mark, each its own statement (docs/decisions.md 54). Here:

1. claim, load, suppression check and the contact's locale in one UPDATE ... RETURNING
   (asynchronous commit, as every claim: decision 32);
2. render (the template version and its compiled form are cached per process: versions are
   immutable), outside any transaction;
3. the hand-off mark, a statement of its own with a synchronous commit;
4. the provider call, through the same failover service (breakers, rate limits, provider-fault
   detection) as a batch;
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

import logging

from django.conf import settings

from core.priorities import POOLS, Priority
from delivery import signals
from delivery.extensions import message_headers
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.providers.base import Outcome, OutgoingEmail, SendResult
from delivery.services import ledger
from delivery.services.dead_letters import messages_dead_letter
from delivery.services.failover import emails_send_with_failover
from delivery.services.provider_faults import recorded_error
from delivery.services.rate_limits import emails_admit
from delivery.services.sending import BatchReport
from templates.models import TemplateVersion
from templates.rendering import TemplateError, compile_version, render, variant_for_locale

logger = logging.getLogger(__name__)
Status = EmailMessage.Status
POISON_ERROR = "gave up: claimed too many times without an answer (poison?)"

# Template versions are immutable (a change publishes a new version): read once per process.
_versions: dict[int, TemplateVersion] = {}
_VERSIONS_MAX = 512


def message_send_one(*, message_id: int, token: str) -> BatchReport:
    """Claim, render, hand over and record one message; the report says what to do next."""
    report = BatchReport()
    claimed = ledger.message_claim_for_send(message_id=message_id, token=token)
    if claimed is None:
        return report
    signals.batch_claimed.send(sender=__name__, message_ids=[claimed.id], token=token)
    if not _sendable(claimed, token, report):
        return report
    email = _render(claimed, token, report)
    if email is None or not ledger.message_mark_started(message_id=claimed.id, token=token):
        return report
    _send(email, claimed.attempts, token, report)
    return report


def _sendable(claimed: ledger.ClaimedMessage, token: str, report: BatchReport) -> bool:
    """Poison guard and suppression at send, as the batch path's `_load` and `_drop_suppressed`."""
    if claimed.attempts > POOLS[Priority(claimed.priority)].max_send_attempts:
        report.dead_lettered += messages_dead_letter(message_ids=[claimed.id], token=token,
                                                     error=POISON_ERROR)
        return False
    if claimed.suppressed:
        report.suppressed += ledger.messages_mark_final(
            message_ids=[claimed.id], token=token, status=Status.SUPPRESSED, error="suppressed"
        )
        return False
    return True


def _version(version_id: int) -> TemplateVersion:
    version = _versions.get(version_id)
    if version is None:
        if len(_versions) >= _VERSIONS_MAX:
            _versions.clear()
        version = _versions[version_id] = TemplateVersion.objects.get(pk=version_id)
    return version


def _render(claimed: ledger.ClaimedMessage, token: str, report: BatchReport) -> OutgoingEmail | None:
    signals.message_rendering.send(
        sender=__name__, message_id=claimed.id, recipient=claimed.recipient, priority=claimed.priority
    )
    version = variant_for_locale(_version(claimed.template_version_id), claimed.locale)
    compiled = compile_version(version.id, version.subject, version.html_body, version.text_body)
    try:
        rendered = render(compiled, claimed.context)
    except TemplateError as exc:
        report.failed += ledger.messages_mark_final(
            message_ids=[claimed.id], token=token, status=Status.FAILED, error=f"render failed: {exc}"
        )
        return None
    headers = message_headers(EmailMessage(id=claimed.id, recipient=claimed.recipient,
                                           campaign_id=claimed.campaign_id, contact_id=claimed.contact_id))
    return OutgoingEmail(
        message_id=claimed.id, recipient=claimed.recipient, from_email=settings.NOTIFIER_FROM_EMAIL,
        subject=rendered.subject, text=rendered.text, html=rendered.html, headers=headers,
        priority=claimed.priority,
    )


def _send(email: OutgoingEmail, attempts: int, token: str, report: BatchReport) -> None:
    """Providers in failover order; then retry, defer or dead-letter, as a batch would."""
    last: list[tuple[str, SendResult]] = []

    def record(name: str, results: list[SendResult]) -> None:
        for result in results:
            last.append((name, result))
            _record(name, result, token, report)

    outcome = emails_send_with_failover(emails=[email], on_results=record, admit=emails_admit)
    if outcome.deferred:
        ledger.messages_defer(message_ids=[email.message_id], token=token,
                              reason="throttled or every provider unavailable")
        report.deferred_ids.append(email.message_id)
        report.defer_seconds = outcome.wait_seconds
    if outcome.failed:
        _retry_or_dead_letter(email, attempts, last[-1] if last else None, token, report)
    if outcome.wait_seconds:
        report.retry_after_seconds = outcome.wait_seconds


def _record(name: str, result: SendResult, token: str, report: BatchReport) -> None:
    """One provider's verdict: SENT with its attempt row in one statement; anything else as the
    batch path records it (attempt row; FAILED or AMBIGUOUS final; TRANSIENT left to failover)."""
    if result.outcome is Outcome.ACCEPTED:
        report.sent += ledger.message_mark_sent_with_attempt(
            message_id=result.message_id, token=token, provider=name,
            provider_message_id=result.provider_message_id, response_code=result.response_code,
            duration_ms=result.duration_ms,
        )
        return
    DeliveryAttempt.objects.create(
        message_id=result.message_id, provider=name, outcome=result.outcome.value,
        response_code=result.response_code, error=result.error[:2000], duration_ms=result.duration_ms,
    )
    final = {Outcome.PERMANENT: Status.FAILED, Outcome.AMBIGUOUS: Status.AMBIGUOUS}.get(result.outcome)
    if final is None:
        return
    changed = ledger.messages_mark_final(message_ids=[result.message_id], token=token, status=final,
                                         error=recorded_error(result))
    report.failed += changed if final == Status.FAILED else 0
    report.ambiguous += changed if final == Status.AMBIGUOUS else 0


def _retry_or_dead_letter(
    email: OutgoingEmail, attempts: int, last: tuple[str, SendResult] | None, token: str,
    report: BatchReport,
) -> None:
    if attempts >= POOLS[Priority(email.priority)].max_send_attempts:
        error = _attempt_error(last) or "all providers refused"
        report.dead_lettered += messages_dead_letter(message_ids=[email.message_id], token=token,
                                                     error=error)
        return
    ledger.messages_release(message_ids=[email.message_id], token=token,
                            error="all providers refused; retrying")
    report.retry_ids.append(email.message_id)
    logger.warning("no provider accepted message %d; retrying", email.message_id)


def _attempt_error(last: tuple[str, SendResult] | None) -> str:
    """The dead letter's reason, worded as the batch path words it from the last attempt row."""
    if last is None:
        return ""
    name, result = last
    return f"{name} {result.response_code} {result.error[:2000]}".strip()
