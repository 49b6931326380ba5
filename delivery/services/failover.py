"""Send a batch through the providers in failover order, skipping open circuit breakers.

Only TRANSIENT results (refused before acceptance) move on to the next provider; so do the
errors of a provider fault (the same permanent error for everyone: provider_faults.py), which
also opens that provider's breaker. ACCEPTED and PERMANENT results are final, and AMBIGUOUS
ones (the request may have landed) are never sent to another ESP: that would be a cross-ESP
duplicate. The caller records each provider's results as they come (`on_results`), before the
next provider is tried, so a crash in between cannot forget an acceptance.

What is left over is split in two: `failed` met a real transient error (it counts as a send
attempt and backs off), `deferred` was only told "not now" (a breaker was open, a rate limit
had no tokens, or the ESP answered 429): it waits `wait_seconds` and does not use up one of
the message's attempts, so a long throttle never dead-letters anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from delivery.providers import get_provider, provider_order
from delivery.providers.base import Journal, Outcome, OutgoingEmail, SendResult
from delivery.services.circuit_breaker import (
    Decision,
    breaker_check,
    breaker_open,
    breaker_record_failure,
    breaker_record_success,
)
from delivery.services.provider_faults import failed_put_back, results_screen
from delivery.services.rate_limits import provider_throttled

logger = logging.getLogger(__name__)
ResultsHook = Callable[[str, list[SendResult]], None]
HandOverHook = Callable[[str, list[OutgoingEmail]], list[OutgoingEmail]]
Admission = Callable[[str, list[OutgoingEmail]], tuple[list[OutgoingEmail], float]]
THROTTLED_CODE = "429"
PROVIDER_RAISED = "provider raised"  # the error of every email an adapter's exception held


@dataclass
class FailoverOutcome:
    failed: list[OutgoingEmail] = field(default_factory=list)
    deferred: list[OutgoingEmail] = field(default_factory=list)
    wait_seconds: float | None = None
    skipped: list[str] = field(default_factory=list)


def _admit_all(name: str, emails: list[OutgoingEmail]) -> tuple[list[OutgoingEmail], float]:
    return emails, 0.0


def emails_send_with_failover(
    *, emails: Sequence[OutgoingEmail], on_results: ResultsHook, admit: Admission = _admit_all,
    order: Sequence[str] | None = None, on_hand_over: HandOverHook | None = None,
    journal: Journal | None = None,
) -> FailoverOutcome:
    """`order`: the providers to try (default: NOTIFIER_PROVIDERS; a re-send of an AMBIGUOUS
    row names only the provider that may have it). The hand-off mark named `order[0]`; before
    any other provider is offered emails, `on_hand_over(name, emails)` records it and returns the
    emails whose rows this batch still owns (only those are offered), so an AMBIGUOUS row always
    names the one ESP that may have it (decision 89). `journal`: where a
    provider sending message by message records its progress (decision 92)."""
    outcome = FailoverOutcome()
    pending = list(emails)
    counted: set[int] = set()
    skipped_waits: list[float] = []
    order = list(order or provider_order())
    for name in order:
        if not pending:
            break
        decision, breaker_wait = breaker_check(provider=name)
        if decision is Decision.DENY:
            outcome.skipped.append(name)
            skipped_waits.append(breaker_wait)
            continue
        admitted, wait = admit(name, pending)
        if len(admitted) < len(pending):
            # Our own limiter said "not yet": they wait for this (preferred) provider.
            admitted_ids = {e.message_id for e in admitted}
            outcome.deferred += [e for e in pending if e.message_id not in admitted_ids]
            _note_wait(outcome, wait)
        if not admitted:
            pending = []
            break
        if on_hand_over is not None and name != order[0]:
            admitted = on_hand_over(name, admitted)  # the rows still this batch's
            if not admitted:
                continue
        screened = results_screen(provider=name, emails=admitted, results=_call(name, admitted, journal))
        results = screened.results
        _feed_breaker(name, results, fault=screened.fault)
        on_results(name, results)
        if screened.put_back_due:  # after on_results: the rows it marked FAILED are visible
            failed_put_back(provider=name)
        if any(r.response_code == THROTTLED_CODE for r in results):
            provider_throttled(provider=name)
        pending = _transient(admitted, results, counted, outcome)
    outcome.failed = [e for e in pending if e.message_id in counted]
    outcome.deferred += [e for e in pending if e.message_id not in counted]
    if pending and skipped_waits and len(skipped_waits) == len(order):
        _note_wait(outcome, min(skipped_waits))  # every breaker open: back when the first probes
    return outcome


def _call(name: str, emails: list[OutgoingEmail], journal: Journal | None = None) -> list[SendResult]:
    """The provider call; a bug inside an adapter must not leave the rows SENDING for minutes.

    Whatever it raised, the request may have left, so every email is AMBIGUOUS (held, never sent
    elsewhere) and the breaker counts a failure.
    """
    try:
        return get_provider(name).send_batch(emails, journal)
    except Exception as exc:
        logger.exception("provider %s raised; holding %d messages as ambiguous", name, len(emails))
        error = f"{PROVIDER_RAISED} {type(exc).__name__}: {exc}"[:500]
        return [SendResult(e.message_id, Outcome.AMBIGUOUS, error=error) for e in emails]


def _transient(
    sent: list[OutgoingEmail], results: list[SendResult], counted: set[int], outcome: FailoverOutcome
) -> list[OutgoingEmail]:
    transient = {r.message_id: r for r in results if r.outcome is Outcome.TRANSIENT}
    for result in transient.values():
        if result.response_code != THROTTLED_CODE:
            counted.add(result.message_id)
        _note_wait(outcome, result.retry_after_seconds)
    return [email for email in sent if email.message_id in transient]


def _note_wait(outcome: FailoverOutcome, wait: float | None) -> None:
    if wait:
        outcome.wait_seconds = max(outcome.wait_seconds or 0.0, wait)


def _feed_breaker(name: str, results: list[SendResult], fault: str = "") -> None:
    """Any acceptance or permanent verdict proves the ESP is up; all-failed counts as a failure.

    A provider fault (the same permanent error for everyone) opens it at once: the ESP answers,
    but the answers are of no use, and every call would only burn more messages' attempts.
    """
    if fault:
        breaker_open(provider=name, reason=f"provider fault: {fault}")
        return
    if any(r.outcome in (Outcome.ACCEPTED, Outcome.PERMANENT) for r in results):
        breaker_record_success(provider=name)
        return
    waits = [r.retry_after_seconds for r in results if r.retry_after_seconds]
    breaker_record_failure(provider=name, retry_after=max(waits) if waits else None)
