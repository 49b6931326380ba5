"""Send one batch of claimed messages: claim, render, hand over, record.

The order matters for exactly-once: the claim (one UPDATE) comes before any work; the hand-off
mark comes right before the provider call; results are recorded per outcome, one UPDATE each.
A crash before the hand-off leaves rows that the same task (redelivered) or the recovery loop
can safely send again; a crash after it leaves rows that become AMBIGUOUS, never resent blindly.

Bulk batches (P3) on a task's first delivery write each row once less (decision 59): the
QUEUED rows are read and rendered unclaimed, then claimed and handed over in one synchronously
committed UPDATE. A crash while rendering wrote nothing; the redelivered task (Redis remembers
its first delivery) takes the path above, whose claim counts the attempt the poison guard reads.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from clients.key_types import KeyType
from core.db_outage import hold_through_outage
from core.live_counts import provider_call_counts
from core.priorities import POOLS, Priority
from core.redis_client import get_redis, redis_key
from delivery import signals
from delivery.extensions import SendableMessage, message_headers, render_addition
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.providers import provider_order
from delivery.providers.base import Outcome, OutgoingEmail, SendResult
from delivery.services import ledger
from delivery.services.ambiguity import ambiguity_held
from delivery.services.dead_letters import messages_dead_letter
from delivery.services.failover import PROVIDER_RAISED, emails_send_with_failover
from delivery.services.ledger import ClaimedMessage
from delivery.services.provider_faults import recorded_error
from delivery.services.rate_limits import emails_admit
from delivery.services.sandbox import SANDBOX_PROVIDER, sandbox_settle
from delivery.services.send_journal import SendJournal
from delivery.services.variants import variants_for_batch
from templates.models import TemplateVersion
from templates.rendering import TemplateError, render_for_send

logger = logging.getLogger(__name__)
Status = EmailMessage.Status
# Bulk batches only (decision 59): a P2 batch keeps its claim before rendering, the state
# tests/campaigns/test_campaign_e2e.py kills workers in and pause/bounce tests observe.
HAND_OFF_AT_CLAIM = frozenset({Priority.LOW})
FIRST_DELIVERY_TTL_SECONDS = 3600  # the broker's visibility timeout: redeliveries come sooner
POISON_ERROR = "gave up: claimed too many times without an answer (poison?)"
Recorder = Callable[[str, list[SendResult]], None]
T = TypeVar("T")


@dataclass
class BatchReport:
    """What happened to a batch; the task uses `retry_ids` to schedule the next attempt."""

    sent: int = 0
    # Of `sent`, those a real ESP accepted (not the sandbox's, for a test key): the live count.
    live_sent: int = 0
    failed: int = 0
    ambiguous: int = 0
    suppressed: int = 0
    dead_lettered: int = 0
    retry_ids: list[int] = field(default_factory=list)
    retry_after_seconds: float | None = None
    # Never offered to an ESP (throttled, breakers open, 429): wait, without using an attempt.
    deferred_ids: list[int] = field(default_factory=list)
    defer_seconds: float | None = None
    # A redelivered batch (its worker died mid-batch) is split into one task per message so a
    # poison message cannot take its batch-mates down with it.
    split_ids: list[int] = field(default_factory=list)
    # Claimed, then not this task's at its hand-off mark: published again at once (the claim
    # fences a copy). A PostgreSQL crash can lose a claim's asynchronous commit (decision 32),
    # leaving the row QUEUED with no task; a lease that expired meanwhile was re-published by
    # the recovery already, and this extra copy claims nothing.
    republish_ids: list[int] = field(default_factory=list)

    # The dashboard's live count of the provider calls made (core/live_counts.py), added with
    # `live_sent` by the task in one round trip.
    provider_calls: Counter[str] = field(default_factory=Counter)

    def count_sent(self, provider: str, marked: int) -> None:
        self.sent += marked
        if provider != SANDBOX_PROVIDER:
            self.live_sent += marked

    def count_calls(self, provider: str, results: Sequence[SendResult]) -> None:
        """Count a provider's calls for the live series; the sandbox's answers are no provider's
        calls."""
        if provider != SANDBOX_PROVIDER:
            calls = [(result.outcome is Outcome.ACCEPTED, result.duration_ms) for result in results]
            self.provider_calls.update(provider_call_counts(provider, calls))


def message_batch_send(
    *, message_ids: Sequence[int], token: str, priority: int | None = None, pinned: str = ""
) -> BatchReport:
    """Send a batch; `priority` (the task's) lets a bulk (P3) batch's first delivery claim and
    hand over in one write. `pinned`: the only provider to offer them to (the re-send of an
    AMBIGUOUS row goes where the first one may have gone, never to a second ESP)."""
    report = BatchReport()
    providers = [pinned] if pinned else provider_order()
    first = priority in HAND_OFF_AT_CLAIM and _first_delivery(token)
    if first and _send_claimed_at_hand_off(message_ids, token, report, providers):
        return report
    claimed = ledger.messages_claim_for_send(message_ids=message_ids, token=token)
    if not claimed:
        # Nothing QUEUED, or this batch ran before and died after its claim (the claim took
        # nothing then): split it so a poison message cannot take its batch-mates down with it.
        if len(message_ids) > 1 and _redelivered(message_ids, token):
            report.split_ids = _split(message_ids, token)
        return report
    signals.batch_claimed.send(sender=__name__, message_ids=[m.id for m in claimed], token=token)
    messages = _guard(claimed, token, report)
    messages = _drop_suppressed(messages, token, report)
    emails = render_claimed(messages, token, report)
    attempts = {m.id: m.attempts for m in claimed}
    emails = _test_keys_to_sandbox(messages, emails, token, report, attempts)
    ids = [e.message_id for e in emails]
    # The hand-off re-checks suppression: an address suppressed since the claim read it is
    # SUPPRESSED now, never offered (F17).
    hand_off = hand_off_held(partial(ledger.messages_mark_started, message_ids=ids, token=token,
                                     provider=providers[0]))
    report.suppressed += len(hand_off.suppressed)
    taken = hand_off.started | hand_off.suppressed
    report.republish_ids = [email.message_id for email in emails if email.message_id not in taken]
    emails = [email for email in emails if email.message_id in hand_off.started]
    if emails:
        send_with_failover(emails, token, report, attempts, providers=providers)
    return report


def _test_keys_to_sandbox(
    messages: list[ClaimedMessage], emails: list[OutgoingEmail], token: str, report: BatchReport,
    attempts: dict[int, int],
) -> list[OutgoingEmail]:
    """The test keys' rendered emails are settled by the sandbox here; the others are returned,
    for the providers. One attribute check per message on the live path."""
    test_ids = {m.id for m in messages if m.key_type == KeyType.TEST}
    if not test_ids:
        return emails
    sandbox_send([e for e in emails if e.message_id in test_ids], token, report, attempts)
    return [email for email in emails if email.message_id not in test_ids]


def sandbox_send(
    emails: list[OutgoingEmail], token: str, report: BatchReport, attempts: dict[int, int]
) -> None:
    """A test key's claimed and rendered emails: the hand-off mark (naming the sandbox as the
    provider, re-checking the test key's suppressions), then the sandbox's answers recorded as a
    provider's would be (delivery/services/sandbox.py). No provider, rate token or breaker."""
    if not emails:
        return
    ids = [email.message_id for email in emails]
    hand_off = hand_off_held(partial(ledger.messages_mark_started, message_ids=ids, token=token,
                                     provider=SANDBOX_PROVIDER))
    report.suppressed += len(hand_off.suppressed)
    taken = hand_off.started | hand_off.suppressed
    report.republish_ids += [pk for pk in ids if pk not in taken]

    def release(failed: list[OutgoingEmail]) -> None:
        hold_through_outage(lambda: _retry_or_dead_letter(failed, token, report, attempts),
                            what="releasing sandbox failures")

    sandbox_settle([e for e in emails if e.message_id in hand_off.started],
                   record=results_recorder(token, report), release=release)


def _first_delivery(token: str) -> bool:
    """True the first time this task id runs (SET NX); False on a redelivery or if Redis is
    unreachable (the three-write path is always safe)."""
    try:
        key = redis_key("delivery", "batch_seen", token)
        return bool(get_redis().set(key, 1, nx=True, ex=FIRST_DELIVERY_TTL_SECONDS))
    except RedisError:
        logger.warning("first-delivery marker unavailable; claiming before rendering", exc_info=True)
        return False


def _send_claimed_at_hand_off(
    message_ids: Sequence[int], token: str, report: BatchReport, providers: list[str]
) -> bool:
    """Render the QUEUED rows unclaimed, then claim + hand over in one write; False (nothing
    written) when a row needs the classic path: bulk rows only, and a row that
    this claim would take past its attempt limit is dead-lettered there (poison guard)."""
    messages = ledger.messages_queued_read_for_send(message_ids=message_ids)
    # A test key's rows take the classic path, whose hand-off mark names the sandbox.
    if any(m.priority not in HAND_OFF_AT_CLAIM or m.attempts >= attempt_limit(m.priority)
           or m.key_type == KeyType.TEST for m in messages):
        return False
    if not messages:
        return True  # claimed by another copy, or not QUEUED any more: nothing to do
    # Receivers see the batch before rendering, as on the classic path (rows not claimed yet).
    signals.batch_claimed.send(sender=__name__, message_ids=[m.id for m in messages], token=token)
    gone = [m.id for m in messages if m.contact_gone]
    emails, broken = _render_each([m for m in messages if not m.contact_gone])
    ids = [e.message_id for e in emails]
    claimed = hand_off_held(partial(ledger.messages_claim_hand_off, message_ids=ids, token=token,
                                    provider=providers[0]))
    report.suppressed += sum(1 for status, _ in claimed.values() if status == Status.SUPPRESSED)
    _unsendable_finish(broken, gone, token, report)
    emails = [e for e in emails if claimed.get(e.message_id, ("", 0))[0] == Status.SENDING]
    if emails:
        attempts = {pk: count for pk, (_, count) in claimed.items()}
        send_with_failover(emails, token, report, attempts, providers=providers)
    return True


def _unsendable_finish(
    broken: dict[str, list[int]], gone: list[int], token: str, report: BatchReport
) -> None:
    """Rows read unclaimed that will not be sent: claim them (counting the attempt), then mark
    the ones this task now owns FAILED with their render error, or SUPPRESSED (contact gone)."""
    if not broken and not gone:
        return
    ids = [*chain(*broken.values()), *gone]
    owned = {pk for pk, _ in ledger.messages_claim(message_ids=ids, token=token)}
    _broken_fail({error: [pk for pk in ids if pk in owned] for error, ids in broken.items()}, token, report)
    _contact_gone_suppress([pk for pk in gone if pk in owned], token, report)


def hand_off_held(mark: Callable[..., T]) -> T:
    """`mark(started_at=<now>)`, a hand-off mark, held through a database outage (core/db_outage.py):
    this process must learn which rows it may send, and a mark whose answer the outage swallowed
    is run again with the same instant, which returns the rows it marked (and no other copy's)."""
    started_at = timezone.now()
    return hold_through_outage(lambda: mark(started_at=started_at), what="marking a hand-off")


def attempt_limit(priority: int) -> int:
    """How many claims a message of `priority` gets before it is dead-lettered."""
    return POOLS[Priority(priority)].max_send_attempts


def _redelivered(message_ids: Sequence[int], token: str) -> bool:
    """This very task ran before and died after claiming (Celery redelivers with the same id)."""
    return _claimed_not_handed_over(message_ids, token).exists()


def _claimed_not_handed_over(message_ids: Sequence[int], token: str):
    return EmailMessage.objects.filter(
        id__in=message_ids, status__unindexed=Status.SENDING, claim_token=token, send_started_at__isnull=True
    )


def _split(message_ids: Sequence[int], token: str) -> list[int]:
    owned = list(_claimed_not_handed_over(message_ids, token).values_list("id", flat=True))
    # Back to QUEUED keeping the attempt the claim counted: a poison message still runs out.
    ledger.messages_release(message_ids=owned, token=token, error="batch redelivered; split")
    queued = EmailMessage.objects.filter(id__in=message_ids, status__unindexed=Status.QUEUED)
    logger.warning("batch of %d redelivered after a crash; splitting", len(message_ids))
    return list(queued.values_list("id", flat=True))


def _guard(rows: list[ClaimedMessage], token: str, report: BatchReport) -> list[ClaimedMessage]:
    """The claimed rows that may go on: a row past its priority's attempt limit fails here
    (poison guard), a campaign row whose contact was deleted is SUPPRESSED (decision 65)."""
    exhausted = {m.id for m in rows if m.attempts > attempt_limit(m.priority)}
    if exhausted:
        report.dead_lettered += messages_dead_letter(
            message_ids=sorted(exhausted), token=token, error=POISON_ERROR
        )
    _contact_gone_suppress([m.id for m in rows if m.contact_gone and m.id not in exhausted], token, report)
    return [m for m in rows if m.id not in exhausted and not m.contact_gone]


def _contact_gone_suppress(message_ids: list[int], token: str, report: BatchReport) -> None:
    """Campaign rows whose contact was deleted after the fan-out: nothing to render them with,
    and a deleted contact is not mailed (decision 65)."""
    if message_ids:
        report.suppressed += ledger.messages_mark_final(
            message_ids=message_ids, token=token, status=Status.SUPPRESSED, error=ledger.CONTACT_GONE_ERROR
        )


def _drop_suppressed(messages: list[ClaimedMessage], token: str, report: BatchReport) -> list[ClaimedMessage]:
    """Re-check at send time (read with the rows, after their claim): a suppression committed
    mid-campaign stops further sends. One committed later still is caught by the hand-off mark."""
    blocked = [m.id for m in messages if m.suppressed]
    if blocked:
        report.suppressed += ledger.messages_mark_final(
            message_ids=blocked, token=token, status=Status.SUPPRESSED, error="suppressed"
        )
    return [m for m in messages if not m.suppressed]


def render_claimed(messages: list[ClaimedMessage], token: str, report: BatchReport) -> list[OutgoingEmail]:
    """Render the claimed rows (a batch's, or send_one's one); the ones that cannot be rendered
    are FAILED with their error."""
    emails, broken = _render_each(messages)
    _broken_fail(broken, token, report)
    return emails


def _render_each(messages: list[ClaimedMessage]) -> tuple[list[OutgoingEmail], dict[str, list[int]]]:
    """The rendered emails, and the ids that failed to render grouped by error."""
    emails: list[OutgoingEmail] = []
    broken: dict[str, list[int]] = defaultdict(list)
    variants = variants_for_batch((m.template_version_id, m.locale) for m in messages)
    for message in messages:
        try:
            emails.append(outgoing_email(message, variants[message.template_version_id, message.locale]))
        except TemplateError as exc:
            broken[f"render failed: {exc}"].append(message.id)
    return emails, broken


def outgoing_email(message: SendableMessage, version: TemplateVersion) -> OutgoingEmail:
    """One message rendered from `version` (its locale's variant), ready for a provider; raises
    TemplateError. Receivers of `message_rendering` hear of it first (delivery/signals.py)."""
    signals.message_rendering.send(
        sender=__name__, message_id=message.id, recipient=message.recipient, priority=message.priority
    )
    addition = render_addition(message, version)
    if addition is None:
        rendered = render_for_send(version, message.context)
    else:
        rendered = render_for_send(version, {**message.context, **addition.context}, addition.footer)
    return OutgoingEmail(
        message_id=message.id,
        recipient=message.recipient,
        from_email=settings.NOTIFIER_FROM_EMAIL,
        subject=rendered.subject,
        text=rendered.text,
        html=rendered.html,
        headers=message_headers(message),
        priority=message.priority,
        fill=rendered.fill,
    )


def _broken_fail(broken: dict[str, list[int]], token: str, report: BatchReport) -> None:
    for error, ids in broken.items():
        if ids:
            report.failed += ledger.messages_mark_final(
                message_ids=ids, token=token, status=Status.FAILED, error=error
            )


def results_recorder(token: str, report: BatchReport) -> Recorder:
    """Each provider's verdicts: the ledger, then the attempt rows (the failover calls it).

    Each write is held through a database outage: the provider has answered and the answer
    exists only here. The ledger's writes are guarded by state and claim token, so running them
    again changes nothing twice; it goes first, so that an attempt row is written again only if
    its own INSERT's answer is lost (a log line, never a send)."""

    def record(name: str, results: list[SendResult]) -> None:
        hold_through_outage(lambda: _record_results(name, results, token, report),
                            what=f"recording {name}'s answers")
        hold_through_outage(lambda: ledger.attempts_record(provider=name, results=results),
                            what=f"recording {name}'s attempts")
        report.count_calls(name, results)

    return record


def send_with_failover(
    emails: list[OutgoingEmail], token: str, report: BatchReport, attempts: dict[int, int],
    record: Recorder | None = None, providers: list[str] | None = None,
) -> None:
    """`providers` in order (failover service; default NOTIFIER_PROVIDERS), each one's verdicts
    to `record` (default: `results_recorder`); then retry, defer or dead-letter what is left."""
    record = record or results_recorder(token, report)

    def hand_over(name: str, offered: list[OutgoingEmail]) -> list[OutgoingEmail]:
        ids = [email.message_id for email in offered]
        mark = partial(ledger.messages_mark_provider, message_ids=ids, token=token, provider=name)
        owned = hold_through_outage(mark, what=f"recording the hand-over to {name}")
        return [email for email in offered if email.message_id in owned]

    outcome = emails_send_with_failover(emails=emails, on_results=record, admit=emails_admit,
                                        order=providers, on_hand_over=hand_over,
                                        journal=SendJournal(token))
    if outcome.deferred:
        ids = [email.message_id for email in outcome.deferred]
        reason = "throttled or every provider unavailable"
        # Held like the answers: these rows are handed over, and only this process knows that
        # no provider was offered them.
        hold_through_outage(lambda: ledger.messages_defer(message_ids=ids, token=token, reason=reason),
                            what="deferring a batch")
        report.deferred_ids.extend(ids)
        report.defer_seconds = outcome.wait_seconds
    if outcome.failed:
        hold_through_outage(lambda: _retry_or_dead_letter(outcome.failed, token, report, attempts),
                            what="releasing refused messages")
    if outcome.wait_seconds:
        report.retry_after_seconds = outcome.wait_seconds


def _retry_or_dead_letter(
    failed: list[OutgoingEmail], token: str, report: BatchReport, attempts: dict[int, int]
) -> None:
    limit = {email.message_id: attempt_limit(email.priority) for email in failed}
    done = [e.message_id for e in failed if attempts.get(e.message_id, 0) >= limit[e.message_id]]
    if done:
        error = _last_error(done) or "all providers refused"
        report.dead_lettered += messages_dead_letter(message_ids=done, token=token, error=error)
    _release_for_retry([e for e in failed if e.message_id not in set(done)], token, report)


def _last_error(message_ids: list[int]) -> str:
    last = DeliveryAttempt.objects.filter(message_id__in=message_ids).order_by("-id").first()
    return f"{last.provider} {last.response_code} {last.error}".strip() if last else ""


def _record_results(name: str, results: list[SendResult], token: str, report: BatchReport) -> None:
    """Accepted, permanent and ambiguous results to the ledger; transient ones are left to the
    failover (next provider, then retry or dead letter)."""
    by_outcome: dict[Outcome, list[SendResult]] = defaultdict(list)
    for result in results:
        by_outcome[result.outcome].append(result)
    accepted = {r.message_id: r.provider_message_id for r in by_outcome[Outcome.ACCEPTED]}
    report.count_sent(name, ledger.messages_mark_sent(provider_ids=accepted, provider=name, token=token))
    for error, ids in _group_by_error(by_outcome[Outcome.PERMANENT]).items():
        report.failed += ledger.messages_mark_final(message_ids=ids, token=token, status=Status.FAILED,
                                                    error=error)
    for error, ids in _group_by_error(by_outcome[Outcome.AMBIGUOUS]).items():
        report.ambiguous += _hold_ambiguous(name, ids, token, error)


def _hold_ambiguous(name: str, ids: list[int], token: str, error: str) -> int:
    """AMBIGUOUS, and the reason in the ambiguity log, in one transaction: run again after an
    outage swallowed its answer, the guarded mark changes nothing and logs nothing twice."""
    reason = "provider_raised" if error.startswith(PROVIDER_RAISED) else "no_answer"
    with transaction.atomic():
        changed = ledger.messages_mark_final(message_ids=ids, token=token, status=Status.AMBIGUOUS,
                                             error=error)
        if changed:
            ambiguity_held(rows=[(pk, name) for pk in ids], reason=reason, error=error)
    return changed


def _group_by_error(results: list[SendResult]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for result in results:
        groups[recorded_error(result)].append(result.message_id)
    return groups


def _release_for_retry(pending: list[OutgoingEmail], token: str, report: BatchReport) -> None:
    ids = [email.message_id for email in pending]
    if not ids:
        return
    ledger.messages_release(message_ids=ids, token=token, error="all providers refused; retrying")
    report.retry_ids.extend(ids)
    logger.warning("no provider accepted %d messages; retrying", len(ids))
