"""Send one batch of claimed messages: claim, render, hand over, record.

The order matters for exactly-once: the claim (one UPDATE) comes before any work; the hand-off
mark comes right before the provider call; results are recorded per outcome, one UPDATE each.
A crash before the hand-off leaves rows that the same task (redelivered) or the recovery loop
can safely send again; a crash after it leaves rows that become AMBIGUOUS, never resent blindly.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings

from campaigns.models import Suppression
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.providers import get_provider, provider_order
from delivery.providers.base import Outcome, OutgoingEmail, SendResult
from delivery.services import ledger
from delivery.services.headers import message_headers
from notifier.priorities import POOLS, Priority
from templates.rendering import TemplateError, compile_version, render

logger = logging.getLogger(__name__)
Status = EmailMessage.Status


@dataclass
class BatchReport:
    """What happened to a batch; the task uses `retry_ids` to schedule the next attempt."""

    sent: int = 0
    failed: int = 0
    ambiguous: int = 0
    suppressed: int = 0
    retry_ids: list[int] = field(default_factory=list)
    retry_after_seconds: float | None = None


def message_batch_send(*, message_ids: Sequence[int], token: str) -> BatchReport:
    report = BatchReport()
    claimed = ledger.messages_claim(message_ids=message_ids, token=token)
    if not claimed:
        return report
    if settings.NOTIFIER_FAULT_PAUSE_AFTER_CLAIM:
        time.sleep(settings.NOTIFIER_FAULT_PAUSE_AFTER_CLAIM)
    messages = _load(claimed, token, report)
    messages = _drop_suppressed(messages, token, report)
    emails = _render_all(messages, token, report)
    started = ledger.messages_mark_started(message_ids=[e.message_id for e in emails], token=token)
    emails = [email for email in emails if email.message_id in started]
    if emails:
        _send_with_failover(emails, token, report)
    return report


def _load(claimed: list[tuple[int, int]], token: str, report: BatchReport) -> list[EmailMessage]:
    """Fetch claimed rows; a row past its priority's attempt limit fails here (poison guard)."""
    rows = list(
        EmailMessage.objects.filter(id__in=[pk for pk, _ in claimed]).select_related(
            "template_version"
        )
    )
    exhausted = [m.id for m in rows if m.attempts > POOLS[Priority(m.priority)].max_send_attempts]
    if exhausted:
        error = "gave up: too many attempts"
        report.failed += ledger.messages_mark_final(
            message_ids=exhausted, token=token, status=Status.FAILED, error=error
        )
    return [m for m in rows if m.id not in set(exhausted)]


def _drop_suppressed(messages: list[EmailMessage], token: str, report: BatchReport) -> list[EmailMessage]:
    """Re-check at send time: a suppression committed mid-campaign stops further sends."""
    addresses = {m.recipient.lower() for m in messages}
    suppressed = set(Suppression.objects.filter(email__in=addresses).values_list("email", flat=True))
    blocked = [m.id for m in messages if m.recipient.lower() in suppressed]
    if blocked:
        report.suppressed += ledger.messages_mark_final(
            message_ids=blocked, token=token, status=Status.SUPPRESSED, error="suppressed"
        )
    return [m for m in messages if m.recipient.lower() not in suppressed]


def _render_all(messages: list[EmailMessage], token: str, report: BatchReport) -> list[OutgoingEmail]:
    emails, broken = [], defaultdict(list)
    for message in messages:
        version = message.template_version
        compiled = compile_version(version.id, version.subject, version.html_body, version.text_body)
        try:
            rendered = render(compiled, message.context)
        except TemplateError as exc:
            broken[f"render failed: {exc}"].append(message.id)
            continue
        emails.append(
            OutgoingEmail(
                message_id=message.id,
                recipient=message.recipient,
                from_email=settings.NOTIFIER_FROM_EMAIL,
                subject=rendered.subject,
                text=rendered.text,
                html=rendered.html,
                headers=message_headers(message),
            )
        )
    for error, ids in broken.items():
        report.failed += ledger.messages_mark_final(
            message_ids=ids, token=token, status=Status.FAILED, error=error
        )
    return emails


def _send_with_failover(emails: list[OutgoingEmail], token: str, report: BatchReport) -> None:
    """Try providers in order; only TRANSIENT results move on to the next one."""
    pending = emails
    for name in provider_order():
        results = get_provider(name).send_batch(pending)
        _record_attempts(name, results)
        transient = _record_results(name, results, token, report)
        pending = [email for email in pending if email.message_id in transient]
        if not pending:
            return
    _release_for_retry(pending, token, report)


def _record_results(name: str, results: list[SendResult], token: str, report: BatchReport) -> set[int]:
    by_outcome: dict[Outcome, list[SendResult]] = defaultdict(list)
    for result in results:
        by_outcome[result.outcome].append(result)
    accepted = {r.message_id: r.provider_message_id for r in by_outcome[Outcome.ACCEPTED]}
    report.sent += ledger.messages_mark_sent(provider_ids=accepted, provider=name, token=token)
    for outcome, status in ((Outcome.PERMANENT, Status.FAILED), (Outcome.AMBIGUOUS, Status.AMBIGUOUS)):
        for error, ids in _group_by_error(by_outcome[outcome]).items():
            changed = ledger.messages_mark_final(message_ids=ids, token=token, status=status, error=error)
            report.failed += changed if status == Status.FAILED else 0
            report.ambiguous += changed if status == Status.AMBIGUOUS else 0
    transient = by_outcome[Outcome.TRANSIENT]
    waits = [r.retry_after_seconds for r in transient if r.retry_after_seconds]
    if waits:
        report.retry_after_seconds = max(waits)
    return {r.message_id for r in transient}


def _group_by_error(results: list[SendResult]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for result in results:
        groups[f"{result.response_code} {result.error}".strip()].append(result.message_id)
    return groups


def _release_for_retry(pending: list[OutgoingEmail], token: str, report: BatchReport) -> None:
    ids = [email.message_id for email in pending]
    ledger.messages_release(message_ids=ids, token=token, error="all providers refused; retrying")
    report.retry_ids.extend(ids)
    logger.warning("no provider accepted %d messages; retrying", len(ids))


def _record_attempts(name: str, results: list[SendResult]) -> None:
    DeliveryAttempt.objects.bulk_create(
        DeliveryAttempt(
            message_id=r.message_id,
            provider=name,
            outcome=r.outcome.value,
            response_code=r.response_code,
            error=r.error[:2000],
            duration_ms=r.duration_ms,
        )
        for r in results
    )
