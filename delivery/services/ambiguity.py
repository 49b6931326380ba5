"""AMBIGUOUS sends settled from evidence, not left to an operator (decision 89).

A send is AMBIGUOUS when its request may have reached an ESP and no answer was recorded: a read
timeout, no reply to DATA, an adapter that raised, or a worker lost mid-call (the recovery).
A request that provably never left (connection refused, connect timeout, DNS) is TRANSIENT
instead and goes to the next provider or back to the queue at once (providers/http.py, smtp.py).

The hand-off mark names the provider (and a failover names the next one before offering it),
so an AMBIGUOUS row names the one ESP that may have it. Then, in this order:

1. Any event of that ESP about the message (SendGrid processed/delivered/bounce/deferred,
   Mailgun accepted/delivered/failed, SES Send/Delivery/Bounce) proves it took the message:
   SENT (feedback/services/processing.py calls `delivery.services.reconcile` when it arrives;
   one stored while the row was still SENDING is found here, through the feedback app's
   evidence reader, before anything is re-sent).
2. Where the ESP can be searched by our id (Mailgun's events API, SendGrid's Email Activity API,
   a paid add-on; SES cannot: delivery/services/esp_lookup.py), it is asked, a batch at a time,
   at most every NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS per provider. Found: SENT (reason
   `esp_lookup`). Not found, for a send handed over more than
   NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS ago (ESP searches are eventually
   consistent): the request never arrived, and it is sent again through the same provider
   (`esp_lookup_not_found`) with no wait for its events. No answer (error, timeout, the lookup
   off for an account without it) or a send too recent: the rules below decide.
3. Events of that ESP have arrived for messages handed over more than
   NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS after this one, and none for this one: its webhook
   is configured and delivering, so this message never arrived. It is sent again, through the
   same provider only (a second ESP could make a cross-ESP duplicate).
4. A provider that sends no events (SMTP) keeps its rows held, unless the operator listed it in
   NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS: then they are re-sent after the same window.

Each step is written to AmbiguityRecord with its evidence (for a lookup: `source` lookup, the
API asked, and what it answered); `ambiguous_summary` reads the rows still held by age and
reason for the dashboard and the API.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from delivery.extensions import esp_evidence
from delivery.models import AmbiguityRecord, EmailMessage, ProviderEventCoverage
from delivery.providers.base import Found
from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue
from delivery.services.esp_lookup import esp_lookups, lookup_next_step, lookup_queries

logger = logging.getLogger(__name__)
Kind = AmbiguityRecord.Kind
# Rows looked at per sweep, oldest first: a backlog is worked through a page per tick.
RESOLVE_PAGE = 1000


@dataclass
class ResolveReport:
    settled: int = 0
    resent: int = 0
    held: dict[str, int] = field(default_factory=dict)


def ambiguity_held(*, rows: Iterable[tuple[int, str]], reason: str, error: str = "") -> int:
    """Log that these (message id, provider) rows became AMBIGUOUS, and why."""
    records = [AmbiguityRecord(message_id=pk, kind=Kind.HELD, reason=reason, provider=provider,
                               evidence={"error": error[:500]} if error else {})
               for pk, provider in rows]
    AmbiguityRecord.objects.bulk_create(records)
    return len(records)


def ambiguous_message_settle(*, message_id: int, provider: str, provider_message_id: str = "",
                             evidence: Mapping | None = None, reason: str = "") -> bool:
    """AMBIGUOUS (or SENDING after its hand-off) -> SENT: the ESP took it, as `evidence` (an ESP
    event, or its lookup's answer: `reason` esp_lookup) shows, or as an operator says (no
    evidence). Logged; False if the row had moved on."""
    with transaction.atomic():
        changed = ledger.handed_over_message_mark_sent(
            message_id=message_id, provider=provider, provider_message_id=provider_message_id,
            error="reconciled: accepted by the ESP")
        if changed:
            AmbiguityRecord.objects.create(message_id=message_id, kind=Kind.SETTLED,
                                           reason=reason or ("esp_event" if evidence else "operator"),
                                           provider=provider, evidence=dict(evidence or {}))
    if changed:
        logger.info("message %s reconciled as accepted by %s", message_id, provider)
    return changed


def provider_events_seen(*, sent_until: Mapping[str, datetime]) -> None:
    """Events have arrived from each provider for a message it was handed at that instant:
    move its coverage forward (never back), one statement per webhook batch."""
    table = ProviderEventCoverage._meta.db_table
    for provider, instant in sorted(sent_until.items()):
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (provider, sent_until, updated_at) VALUES (%s, %s, now()) "
                f"ON CONFLICT (provider) DO UPDATE SET sent_until = GREATEST({table}.sent_until, "
                f"EXCLUDED.sent_until), updated_at = now()",
                [provider, instant])


@dataclass(frozen=True)
class ResendPolicy:
    """Rows of a provider handed over before `cutoff` may be re-sent, for `reason`."""

    cutoff: datetime
    reason: str
    evidence: dict


def resend_policies(providers: Iterable[str], now: datetime) -> dict[str, ResendPolicy]:
    """The providers whose AMBIGUOUS rows may be re-sent, and up to when; the others are held."""
    window = timedelta(seconds=settings.NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS)
    coverage = dict(ProviderEventCoverage.objects.values_list("provider", "sent_until"))
    opted_in = set(settings.NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS)
    policies = {}
    for provider in providers:
        if provider in coverage:
            policies[provider] = ResendPolicy(coverage[provider] - window, "no_event_in_window",
                                              {"events_cover_sends_until": coverage[provider].isoformat(),
                                               "window_s": settings.NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS})
        elif provider in opted_in:
            policies[provider] = ResendPolicy(now - window, "operator_resend_enabled",
                                              {"setting": "NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS",
                                               "window_s": settings.NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS})
    return policies


def next_step(provider: str, policy: ResendPolicy | None) -> str:
    """What will happen to a held row of `provider`, in words (dashboard, API)."""
    if not provider:
        return "held: the provider is unknown (handed over before decision 89); an operator decides"
    return lookup_next_step(provider) + _event_step(provider, policy)


def _event_step(provider: str, policy: ResendPolicy | None) -> str:
    if policy is None:
        return (f"held: no events from {provider} have arrived; an event settles it as sent, an "
                f"operator decides otherwise (admin actions, NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS)")
    if policy.reason == "operator_resend_enabled":
        return f"re-sent through {provider} once handed over before {policy.cutoff:%H:%M:%S} UTC"
    return (f"waiting for {provider}'s events: re-sent through {provider} once its events cover "
            f"sends {settings.NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS} s after this one")


def ambiguous_messages_resolve(*, now: datetime | None = None) -> ResolveReport:
    """One sweep (the recovery loop runs it): settle or re-send what the evidence decides."""
    now = now or timezone.now()
    rows = list(EmailMessage.objects.filter(status=EmailMessage.Status.AMBIGUOUS)
                .order_by("send_started_at")
                .values_list("id", "provider", "send_started_at", "recipient")[:RESOLVE_PAGE])
    report = ResolveReport()
    # An event stored while the row was still SENDING (before its worker was taken for lost)
    # settles it here: it never arrives again to do so.
    evidence = esp_evidence([pk for pk, _, _, _ in rows])
    for pk, found in evidence.items():
        report.settled += ambiguous_message_settle(message_id=pk, provider=found["provider"], evidence=found)
    by_provider: dict[str, list[tuple[int, datetime, str]]] = defaultdict(list)
    for pk, provider, started, recipient in rows:
        if pk not in evidence:
            by_provider[provider].append((pk, started, recipient))
    done = _settle_from_lookups(by_provider, now, report)
    policies = resend_policies([p for p in by_provider if p], now)
    for provider, rows_of in by_provider.items():
        held = [(pk, started) for pk, started, _ in rows_of if pk not in done]
        policy = policies.get(provider)
        if policy is None:
            report.held[provider or "unknown"] = len(held)
            continue
        due = [pk for pk, started in held if started is not None and started < policy.cutoff]
        moved = _resend(due, provider, policy)
        report.resent += len(moved)
        report.held[provider] = len(held) - len(moved)
    return report


def _settle_from_lookups(by_provider: Mapping[str, list[tuple[int, datetime, str]]], now: datetime,
                         report: ResolveReport) -> set[int]:
    """Ask the ESPs that can be searched by our id (delivery/services/esp_lookup.py): a row it
    has is SENT; one it has not, handed over before its search is complete, never arrived and is
    sent again through it, with no wait for its events. The ids settled or re-sent."""
    queries = {provider: lookup_queries([(pk, recipient, started) for pk, started, recipient in rows_of])
               for provider, rows_of in by_provider.items() if provider}
    complete_before = now - timedelta(seconds=settings.NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS)
    started_at = {pk: started for rows_of in by_provider.values() for pk, started, _ in rows_of}
    done: set[int] = set()
    absent: dict[tuple[str, str], list[int]] = defaultdict(list)
    for pk, looked_up in esp_lookups(queries).items():
        if isinstance(looked_up.answer, Found):
            found = looked_up.answer
            if ambiguous_message_settle(message_id=pk, provider=looked_up.provider,
                                        provider_message_id=found.provider_message_id,
                                        evidence=found.evidence(looked_up.api), reason="esp_lookup"):
                report.settled += 1
                done.add(pk)
        elif started_at[pk] < complete_before:
            absent[(looked_up.provider, looked_up.api)].append(pk)
    for (provider, api), ids in absent.items():
        policy = ResendPolicy(complete_before, "esp_lookup_not_found", {
            "source": "lookup", "api": api, "answer": "not found", "asked_at": now.isoformat(),
            "complete_after_s": settings.NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS})
        moved = _resend(ids, provider, policy)
        report.resent += len(moved)
        done.update(moved)
    return done


def _resend(ids: Sequence[int], provider: str, policy: ResendPolicy) -> list[int]:
    """Re-send through `provider` those of `ids` handed over before the policy's cutoff; the
    ids moved back to QUEUED."""
    if not ids:
        return []
    evidence = {**policy.evidence, "handed_over_before": policy.cutoff.isoformat()}
    with transaction.atomic():
        moved = ledger.ambiguous_messages_resend(
            message_ids=ids, provider=provider, handed_over_before=policy.cutoff,
            error=f"re-sent through {provider}: {policy.reason.replace('_', ' ')}")
        AmbiguityRecord.objects.bulk_create([
            AmbiguityRecord(message_id=pk, kind=Kind.RESENT, reason=policy.reason, provider=provider,
                            evidence=evidence)
            for pk, _ in moved])
        by_priority: dict[int, list[int]] = defaultdict(list)
        for pk, priority in moved:
            by_priority[priority].append(pk)
        for priority, pks in by_priority.items():
            transaction.on_commit(lambda pks=pks, priority=priority: messages_enqueue(
                message_ids=pks, priority=priority, pinned=provider))
    if moved:
        logger.warning("re-sending %d AMBIGUOUS messages through %s: %s", len(moved), provider, policy.reason)
    return [pk for pk, _ in moved]
