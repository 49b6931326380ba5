"""The small contract every provider implements.

`send_batch` takes rendered emails and returns one `SendResult` per email, in order. A provider
classifies every outcome, because the caller's next move depends on it:

- ACCEPTED: the provider took it; we store its message id.
- PERMANENT: it will never be accepted (bad address, rejected content): FAILED, no retry.
- TRANSIENT: refused *before* acceptance (connection refused, 4xx, 429): safe to retry here or
  on the next provider.
- AMBIGUOUS: the request left and no answer came back (timeout mid-DATA, connection reset after
  the body was sent). It may have been accepted, so it is never sent to another provider blindly.

An ESP that can be searched by our id (Mailgun's events, SendGrid's Email Activity) also answers
`lookup`: whether it has an AMBIGUOUS send (delivery/services/esp_lookup.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Protocol

from django.db import models

from templates.slots import SlotFill

if TYPE_CHECKING:
    from delivery.providers.webhooks import EspWebhook

# The name under which every ESP carries our message id (SendGrid custom arg, Mailgun `v:`
# variable, SES message tag), so each of its events names our message. The one definition: each
# ESP's send code sets it and its webhook normaliser reads it back.
MESSAGE_ID_KEY = "notifier_message_id"


class Outcome(models.TextChoices):
    """What one provider call did with one message; DeliveryAttempt.outcome records it."""

    ACCEPTED = "accepted"
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class OutgoingEmail:
    message_id: int
    recipient: str
    from_email: str
    subject: str
    text: str
    html: str
    headers: dict[str, str] = field(default_factory=dict)
    priority: int = 2  # core.priorities.Priority; rate limits keep a share for P0
    # The slot form of `text` and `html` when they were rendered from slots (templates/slots.py):
    # batch APIs send the shared static parts once and these values as substitutions.
    fill: SlotFill | None = None


@dataclass(frozen=True)
class SendResult:
    message_id: int
    outcome: Outcome
    provider_message_id: str = ""
    response_code: str = ""
    error: str = ""
    retry_after_seconds: float | None = None
    duration_ms: int = 0


class ProviderError(Exception):
    """Raised by a provider when a whole batch fails the same way."""

    outcome = Outcome.TRANSIENT

    def __init__(self, message: str, *, response_code: str = "", retry_after: float | None = None):
        super().__init__(message)
        self.response_code = response_code
        self.retry_after = retry_after


class TransientError(ProviderError):
    outcome = Outcome.TRANSIENT


class Journal(Protocol):
    """Where a provider that sends a batch one message at a time (SMTP) records its progress as
    it goes, so a worker killed mid-batch leaves proof of what never left
    (delivery/services/send_journal.py, decision 92)."""

    def opened(self, provider: str) -> None: ...

    def starting(self, message_id: int) -> bool:
        """False: do not send this message or the rest of the batch."""
        ...

    def answered(self, result: SendResult) -> None: ...

    def finished(self) -> None:
        """The batch ends (answers may be written late, with the next step)."""
        ...


@dataclass(frozen=True)
class LookupQuery:
    """One AMBIGUOUS send to look for at its ESP: our id, its recipient, when it was handed over."""

    message_id: int
    recipient: str
    handed_over_at: datetime


@dataclass(frozen=True)
class Found:
    """The ESP has a message carrying our id: it took the request."""

    provider_message_id: str = ""
    event: str = ""  # what the ESP shows of it (Mailgun `accepted`, SendGrid's status)
    at: str = ""  # when, as the ESP reports it

    def evidence(self, api: str) -> dict[str, str]:
        return {"source": "lookup", "api": api, "provider_message_id": self.provider_message_id,
                "event": self.event, "at": self.at}


class NotFound:
    """The ESP searched everything it holds for our id and has nothing. Whether that proves the
    request never arrived depends on the send's age: ESP searches are eventually consistent
    (delivery/services/esp_lookup.py)."""

    def __repr__(self) -> str:
        return "NOT_FOUND"


NOT_FOUND = NotFound()
# Per message id; an id left out: the ESP could not say (a search cut short).
LookupAnswers = dict[int, Found | NotFound]


class LookupUnavailableError(Exception):
    """This lookup failed (timeout, 5xx, 429): ask again later."""

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class LookupNotEnabledError(LookupUnavailableError):
    """The account cannot use the ESP's lookup (SendGrid's Email Activity API is a paid add-on;
    a Mailgun domain sending key cannot read events): turn it off for a while."""


class Provider(ABC):
    """One ESP. Instances live for a worker process and may keep connections open."""

    name: str = ""
    # The API a lookup asks (for the evidence it leaves); empty: the ESP offers none (SES, SMTP).
    lookup_api: str = ""

    @abstractmethod
    def send_batch(self, emails: Sequence[OutgoingEmail], journal: Journal | None = None) -> list[SendResult]:
        """Send every email; return one result per email, in the same order. A provider that
        sends message by message writes each step to `journal` (an HTTP batch is one request:
        it has nothing to add to the hand-off mark)."""

    def close(self) -> None:  # noqa: B027 - optional hook; most providers hold nothing
        """Release pooled connections (called at worker shutdown)."""

    def offers_lookup(self) -> bool:
        """Whether `lookup` can be asked: the ESP has a search by our id and is configured."""
        return False

    def lookup(self, queries: Sequence[LookupQuery], *, timeout: float) -> LookupAnswers:
        """Ask the ESP whether it has these messages, within `timeout` seconds in all: `Found`,
        `NOT_FOUND`, or nothing for an id it could not answer. Raises `LookupUnavailableError` (or
        `LookupNotEnabledError`) when the ESP did not answer."""
        raise LookupNotEnabledError(f"{self.name or 'this provider'} offers no lookup by message")


@dataclass(frozen=True)
class Esp:
    """Everything the rest of the code knows an ESP by: one entry in `ESPS` (providers/__init__.py).

    `build_provider` and `webhook()` import their module when called, so a process imports boto3
    only when it sends through SES, and the webhook verifiers' crypto only where webhooks are taken.
    """

    name: str
    build_provider: Callable[[], Provider]  # from settings
    # The module that defines its `WEBHOOK`; None: the ESP reports no events to us (SMTP).
    webhook_module: str | None = None

    def webhook(self) -> EspWebhook:
        return import_module(self.webhook_module).WEBHOOK


def results_for_error(emails: Sequence[OutgoingEmail], error: ProviderError) -> list[SendResult]:
    """The same failure for every email of a batch (e.g. the connection was refused)."""
    return [
        SendResult(
            message_id=email.message_id,
            outcome=error.outcome,
            response_code=error.response_code,
            error=str(error),
            retry_after_seconds=error.retry_after,
        )
        for email in emails
    ]
