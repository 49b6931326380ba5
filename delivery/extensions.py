"""Where other apps plug rules into the send path, so delivery never imports them.

Delivery owns a message's state and the send path; an app above it that has a say in whether a
row may be claimed, or what headers a message carries, registers that rule here from its
`AppConfig.ready()` (campaigns does: pause/cancel and one-click unsubscribe). Every process
loads every installed app before it sends, so a worker always has the same rules as the web.

- claim guards: SQL conditions ANDed into the claim UPDATE (delivery/services/ledger/
  send_path.py `messages_claim`), written against the message table by its full name;
- requeue guards: the same for putting a FAILED row back to QUEUED after a provider fault
  (`failed_messages_requeue`);
- header providers: `f(message) -> {header: value}` merged into each outgoing message
  (`message` is a `SendableMessage`: its id, recipient, priority, context, campaign, contact,
  service, stream and topic).
- render extenders: `f(message, variant) -> RenderAddition | None`, values added to the context
  a message renders with and a footer appended to its parts (consent registers it: the
  preference link and its footer in broadcast mail). Called per message: keep it cheap.
- evidence readers: `f(message ids) -> {id: evidence}`, the ESP events already stored about
  those messages (feedback registers it): an AMBIGUOUS row with one is settled as SENT, never
  re-sent (delivery/services/ambiguity.py, decision 89).
- sandbox event sinks: `f([(message id, recipient)])`, told of test messages the sandbox has
  just accepted, so their simulated ESP events reach the feedback path (feedback registers it:
  delivery/services/sandbox.py).
- personal-data removers: `f({message id: the address it had})`, called inside the transaction
  that strips a batch of messages after their retention, to strip what the app keeps about
  them (feedback registers one: the ESP events' addresses and payloads). Decision 120.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from templates.rendering import Footer

if TYPE_CHECKING:
    from templates.models import TemplateVersion


class SendableMessage(Protocol):
    """What the send path knows of a message when it renders it and asks for its headers: an
    `EmailMessage`, or the plain values a batch reads (delivery/services/ledger/
    send_reads.py `ClaimedMessage`), so no model instance is built per message."""

    @property
    def id(self) -> int: ...
    @property
    def recipient(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def context(self) -> dict: ...
    @property
    def campaign_id(self) -> int | None: ...
    @property
    def contact_id(self) -> int | None: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def stream(self) -> str: ...
    @property
    def topic_id(self) -> int | None: ...


@dataclass(frozen=True)
class RenderAddition:
    """What an app adds to one message's render: values its template may name (the sender did not
    send them), and a footer the platform appends to its HTML and text parts."""

    context: Mapping[str, str] = field(default_factory=dict)
    footer: Footer | None = None


HeaderProvider = Callable[[SendableMessage], dict[str, str]]
RenderExtender = Callable[[SendableMessage, "TemplateVersion"], RenderAddition | None]
EvidenceReader = Callable[[list[int]], dict[int, dict]]
SandboxEventSink = Callable[[list[tuple[int, str]]], None]
PersonalDataRemover = Callable[[dict[int, str]], object]

_claim_guards: list[str] = []
_requeue_guards: list[str] = []
_header_providers: list[HeaderProvider] = []
_render_extenders: list[RenderExtender] = []
_evidence_readers: list[EvidenceReader] = []
_sandbox_event_sinks: list[SandboxEventSink] = []
_personal_data_removers: list[PersonalDataRemover] = []


def register_claim_guard(sql: str) -> None:
    if sql not in _claim_guards:
        _claim_guards.append(sql)


def register_requeue_guard(sql: str) -> None:
    if sql not in _requeue_guards:
        _requeue_guards.append(sql)


def register_header_provider(provider: HeaderProvider) -> None:
    if provider not in _header_providers:
        _header_providers.append(provider)


def register_render_extender(extender: RenderExtender) -> None:
    if extender not in _render_extenders:
        _render_extenders.append(extender)


def register_evidence_reader(reader: EvidenceReader) -> None:
    if reader not in _evidence_readers:
        _evidence_readers.append(reader)


def register_sandbox_event_sink(sink: SandboxEventSink) -> None:
    if sink not in _sandbox_event_sinks:
        _sandbox_event_sinks.append(sink)


def register_personal_data_remover(remover: PersonalDataRemover) -> None:
    if remover not in _personal_data_removers:
        _personal_data_removers.append(remover)


def personal_data_removed(addresses: dict[int, str]) -> None:
    """Tell every registered remover which messages lost their personal data (and their
    addresses, to redact where they are quoted), in the batch's own transaction."""
    for remover in _personal_data_removers:
        remover(addresses)


def sandbox_events_report(accepted: list[tuple[int, str]]) -> None:
    """Tell every registered sink of these accepted test messages ((id, recipient) pairs)."""
    for sink in _sandbox_event_sinks:
        sink(accepted)


def esp_evidence(message_ids: list[int]) -> dict[int, dict]:
    """Per message id, the first registered reader's evidence that an ESP took it."""
    found: dict[int, dict] = {}
    for reader in _evidence_readers:
        for message_id, evidence in reader(message_ids).items():
            found.setdefault(message_id, evidence)
    return found


def claim_guard_sql() -> str:
    """The registered claim conditions as one SQL condition (TRUE when there are none)."""
    return _joined(_claim_guards)


def requeue_guard_sql() -> str:
    return _joined(_requeue_guards)


def message_headers(message: SendableMessage) -> dict[str, str]:
    """The headers every registered provider adds to this message (later ones win)."""
    headers: dict[str, str] = {}
    for provider in _header_providers:
        headers.update(provider(message))
    return headers


def render_addition(message: SendableMessage, variant: TemplateVersion) -> RenderAddition | None:
    """What the registered extenders add to this message's render (None: nothing, the common
    case, which costs no copy of its context). Later extenders win a name; the last footer wins."""
    found = [a for a in (extender(message, variant) for extender in _render_extenders) if a is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    context: dict[str, str] = {}
    for addition in found:
        context.update(addition.context)
    footers = [a.footer for a in found if a.footer is not None]
    return RenderAddition(context, footers[-1] if footers else None)


def _joined(conditions: list[str]) -> str:
    return " AND ".join(conditions) if conditions else "TRUE"
