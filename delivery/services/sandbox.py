"""The test-key sandbox (issue 27): what an ESP would do with a test message, without any ESP.

A message created with a test key goes through the whole send path (claim, render, suppression
checks, hand-off mark) and is then settled here instead of being offered to a provider: no ESP
or SMTP call, no provider or per-domain rate token, no circuit breaker. Its answer is recorded
by the same ledger writes as a provider's (SENT and an attempt row; a temporary failure is
retried, then dead-lettered), and the events an ESP would report later (delivered, bounced,
complained) reach the feedback path as a webhook's would, `NOTIFIER_SANDBOX_EVENT_DELAY_SECONDS`
apart, through `delivery.extensions.sandbox_events_report` (feedback registers it).

What happens is chosen by the recipient, as Amazon SES's mailbox simulator does
(success@simulator.amazonses.com ...): `<scenario>[+label]@simulator.notifier.test`, the label
free (so each test run can use fresh addresses: a bounce's suppression stays). `.test` is a
reserved top-level domain (RFC 6761): sent with a live key by mistake, these addresses reach no
one. Any other address a test key sends to is simply sent, then delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from delivery import extensions
from delivery.providers.base import Outcome, OutgoingEmail, SendResult
from delivery.providers.events import BounceType, EventType, NormalizedEvent

SANDBOX_PROVIDER = "sandbox"  # the `provider` of a test message's row, attempts and events
SIMULATOR_DOMAIN = "simulator.notifier.test"
TEMPORARY_FAILURE_CODE = "451"
TEMPORARY_FAILURE = "451 4.3.0 simulated temporary failure (sandbox)"

Recorder = Callable[[str, list[SendResult]], None]
Release = Callable[[list[OutgoingEmail]], None]


@dataclass(frozen=True)
class Scenario:
    """What the simulated ESP does with a message: accept it (or fail it temporarily, every
    time), then report `events` one step apart, in order."""

    accepted: bool = True
    events: tuple[tuple[EventType, BounceType | None], ...] = ((EventType.DELIVERED, None),)


# The magic local parts (docs/api.md, "Test keys"); anything else: DELIVERED.
SCENARIOS: dict[str, Scenario] = {
    "delivered": Scenario(),
    "bounce": Scenario(events=((EventType.BOUNCED, "hard"),)),
    "soft-bounce": Scenario(events=((EventType.BOUNCED, "soft"), (EventType.DELIVERED, None))),
    "complaint": Scenario(events=((EventType.DELIVERED, None), (EventType.COMPLAINED, None))),
    "temp-fail": Scenario(accepted=False, events=()),
}
DEFAULT_SCENARIO = SCENARIOS["delivered"]


def scenario_for(recipient: str) -> Scenario:
    """The scenario a recipient address asks for (case-insensitive; `+label` ignored)."""
    local, _, domain = recipient.strip().lower().rpartition("@")
    if domain != SIMULATOR_DOMAIN:
        return DEFAULT_SCENARIO
    return SCENARIOS.get(local.partition("+")[0], DEFAULT_SCENARIO)


def sandbox_provider_message_id(message_id: int) -> str:
    return f"{SANDBOX_PROVIDER}-{message_id}"


def sandbox_results(emails: Sequence[OutgoingEmail]) -> list[SendResult]:
    """The simulated ESP's answer to each email, as a provider adapter's would be."""
    results = []
    for email in emails:
        if scenario_for(email.recipient).accepted:
            results.append(SendResult(email.message_id, Outcome.ACCEPTED,
                                      provider_message_id=sandbox_provider_message_id(email.message_id),
                                      response_code="250"))
        else:
            results.append(SendResult(email.message_id, Outcome.TRANSIENT,
                                      response_code=TEMPORARY_FAILURE_CODE, error=TEMPORARY_FAILURE))
    return results


def sandbox_settle(emails: Sequence[OutgoingEmail], *, record: Recorder, release: Release) -> None:
    """Settle handed-over test emails: their answers to `record` (the send path's recorder:
    the ledger and the attempt rows), the temporarily failed ones to `release` (retry, or dead
    letter past their attempts), and the accepted ones' later events to the feedback path."""
    if not emails:
        return
    results = sandbox_results(emails)
    record(SANDBOX_PROVIDER, results)
    failed = {r.message_id for r in results if r.outcome is Outcome.TRANSIENT}
    if failed:
        release([email for email in emails if email.message_id in failed])
    accepted = [(e.message_id, e.recipient) for e in emails if e.message_id not in failed]
    if accepted:
        extensions.sandbox_events_report(accepted)


def sandbox_event_steps(recipient: str) -> int:
    """How many event steps the simulated ESP reports for this recipient."""
    return len(scenario_for(recipient).events)


def sandbox_event(*, message_id: int, recipient: str, step: int, at: datetime) -> NormalizedEvent | None:
    """The event of `step` (1-based) for this accepted message, as a webhook would normalise it;
    None when its scenario has no such step. Its id is fixed by message and step, so an event
    reported twice is stored once."""
    events = scenario_for(recipient).events
    if not 1 <= step <= len(events):
        return None
    event_type, bounce_type = events[step - 1]
    return NormalizedEvent(
        provider=SANDBOX_PROVIDER, event_type=event_type, recipient=recipient, occurred_at=at,
        provider_message_id=sandbox_provider_message_id(message_id), notifier_message_id=str(message_id),
        provider_event_id=f"{message_id}:{step}:{event_type.value}",
        raw={"sandbox": True, "step": step}, bounce_type=bounce_type,
    )
