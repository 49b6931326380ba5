"""A provider that gives every message the same permanent error is broken, not N bad recipients.

A relay that denies us (`550 5.7.1 relay denied`), a suspended or sandboxed account, a sender
domain the ESP no longer accepts: each answers every message with one 5xx, which the provider
adapters rightly classify as PERMANENT. Recorded one by one, that marked 80,501 messages FAILED
while the breaker, which only counts failures to get an answer, stayed closed.

So every provider call's verdicts also feed a streak shared by all workers (Redis, one Lua
script: core/lua/provider_fault.lua). A permanent error counts under its signature: the
response code, the RFC 3463 enhanced code and the text with the recipient's address, other
addresses and any token holding a digit (queue ids, IPs, timestamps) blanked, lower-cased.
When one signature reaches NOTIFIER_PROVIDER_FAULT_SAME_ERRORS distinct recipients in a row,
the provider has a fault: from then on that error is TRANSIENT for the failover service (the
message goes to the next provider, or is retried with backoff, exactly like a 4xx), the caller
opens the provider's breaker and the fault is logged at ERROR and shown on the dashboard, API
overview and /metrics until the provider accepts a message again.

What resets the streak: any acceptance (it also ends a fault), a different permanent error, and
an error about the recipient's own mailbox (enhanced codes X.1.1-X.1.3, X.1.6, X.1.10, X.2.x:
no such user, mailbox full...), which never counts: a stale list can give those in long runs.
Transient and ambiguous results say nothing about this and leave it as it is.

Messages of the streak that were already marked FAILED are put back (FAILED -> QUEUED, sent
again): a permanent error means the provider did not take the message, so sending it again
cannot deliver it twice. Only rows no provider accepted (no provider message id, no sent_at)
whose recorded error still has the fault's signature are moved.

If Redis is unreachable the detector is skipped (verdicts are recorded as they came), like the
breaker and the rate limiter: losing it costs what it cost before, never a send.

Redis keys (prefix NOTIFIER_REDIS_PREFIX), all expiring FAULT_TTL_SECONDS after their last use:

    notifier:fault:<provider>              hash sig, recipients, detected_at (ms): the fault
    notifier:fault:<provider>:streak       hash sig: the error being counted
    notifier:fault:<provider>:recipients   set of the streak's distinct recipients
    notifier:fault:<provider>:messages     hash message id -> sig of the streak
    notifier:fault:<provider>:put_back     hash message id -> sig, FAILED rows to re-queue

    $ redis-cli HGETALL notifier:fault:smtp
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from dataclasses import dataclass, replace

import redis
from django.conf import settings

from core.lua import script
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from delivery.providers.base import Outcome, OutgoingEmail, SendResult
from delivery.services import ledger
from delivery.services.dispatch import messages_enqueue

logger = logging.getLogger(__name__)
Status = EmailMessage.Status
# Long enough to outlive many breaker cooldowns (each probe that meets the fault renews it),
# short enough that a forgotten fault does not haunt the dashboard for days.
FAULT_TTL_SECONDS = 3600
FAULT_PREFIX = "provider fault: "
ERROR_COLUMN_CHARS = 2000  # ledger.messages_mark_final keeps this much of an error
_CODES = re.compile(r"^\s*(?:(\d{3})[\s-]+)?(?:([245])\.(\d{1,3})\.(\d{1,3})\b)?")
_ADDRESS = re.compile(r"[^\s<>\"'(),;:\[\]]+@[^\s<>\"'(),;:\[\]]+")
_HAS_DIGIT = re.compile(r"\S*\d\S*")
# RFC 3463: X.1.1-3 bad destination mailbox / system / syntax, X.1.6 moved, X.1.10 null MX;
# X.2.x mailbox status (disabled, full, over its size limit). A verdict on that mailbox.
_MAILBOX_CODES = {("1", "1"), ("1", "2"), ("1", "3"), ("1", "6"), ("1", "10")}


@dataclass(frozen=True)
class Screened:
    results: list[SendResult]
    fault: str = ""  # the fault's signature when this call met it ("": open no breaker)
    put_back_due: bool = False  # rows of a streak may wait in FAILED: try to put them back


def recorded_error(result: SendResult) -> str:
    """A failed result as the ledger stores it (`error` column): "<code> <text>"."""
    return f"{result.response_code} {result.error}".strip()


def error_signature(recorded: str, recipient: str) -> str | None:
    """What makes two permanent errors "the same"; None for a verdict on the recipient's mailbox.

    "550 5.7.1 <bob@x.org>: Relay access denied" and the same for alice@y.org are one signature.
    """
    recorded = recorded[:ERROR_COLUMN_CHARS]  # as stored: the put-back compares with the row
    match = _CODES.match(recorded)
    code, klass, subject, detail = match.groups()
    if (subject, detail) in _MAILBOX_CODES or subject == "2":
        return None
    text = recorded[match.end():].lower()
    if recipient:
        text = text.replace(recipient.lower(), "{rcpt}")
    text = _HAS_DIGIT.sub("#", _ADDRESS.sub("{addr}", text))
    enhanced = f"{klass}.{subject}.{detail}" if klass else ""
    return " ".join(filter(None, (code, enhanced, *text.split())))


def _keys(provider: str) -> list[str]:
    return [
        redis_key("fault", provider, "streak"), redis_key("fault", provider, "recipients"),
        redis_key("fault", provider, "messages"), fault_key(provider),
        redis_key("fault", provider, "put_back"),
    ]


def fault_key(provider: str) -> str:
    return redis_key("fault", provider)


def _verdicts(emails: list[OutgoingEmail], results: list[SendResult]) -> tuple[list[str], dict[int, str]]:
    """Lua arguments (kind, sig, recipient, id per verdict) and the signature of each counted id."""
    recipients = {email.message_id: email.recipient.lower() for email in emails}
    args: list[str] = []
    signatures: dict[int, str] = {}
    for result in results:
        recipient = recipients.get(result.message_id, "")
        if result.outcome is Outcome.ACCEPTED:
            if args[-4:-3] != ["ok"]:  # one "ok" stands for a run of them: a clean batch is short
                args += ["ok", "", "", ""]
        elif result.outcome is Outcome.PERMANENT:
            sig = error_signature(recorded_error(result), recipient)
            args += ["perm" if sig else "reset", sig or "", recipient, str(result.message_id)]
            if sig:
                signatures[result.message_id] = sig
    return args, signatures


def results_screen(*, provider: str, emails: list[OutgoingEmail], results: list[SendResult]) -> Screened:
    """Feed one provider call's verdicts to the streak; a fault's errors come back TRANSIENT."""
    threshold = settings.NOTIFIER_PROVIDER_FAULT_SAME_ERRORS
    args, signatures = _verdicts(emails, results)
    if threshold < 2 or not args:
        return Screened(results)
    header = [int(time.time() * 1000), threshold, FAULT_TTL_SECONDS * 1000]
    try:
        raw = script("provider_fault")(keys=_keys(provider), args=[*header, *args])
    except redis.RedisError as exc:
        logger.warning("provider fault detector for %s unavailable (skipped): %s", provider, exc)
        return Screened(results)
    fault = raw[0].decode() if isinstance(raw[0], bytes) else str(raw[0])
    held = {message_id for message_id, sig in signatures.items() if fault and sig == fault}
    if not held:  # no fault, or this call did not meet it (e.g. only bad mailboxes)
        return Screened(results, put_back_due=bool(signatures))
    if int(raw[1]):
        _alert(provider, fault, len(held))
    return Screened(_as_transient(results, held), fault, put_back_due=True)


def _as_transient(results: list[SendResult], held: set[int]) -> list[SendResult]:
    """The fault's errors are the provider's problem: TRANSIENT, back after the breaker's cooldown."""
    cooldown = settings.NOTIFIER_BREAKER_COOLDOWN_SECONDS
    return [
        replace(r, outcome=Outcome.TRANSIENT, error=FAULT_PREFIX + r.error, retry_after_seconds=cooldown)
        if r.message_id in held else r
        for r in results
    ]


def _alert(provider: str, fault: str, held: int) -> None:
    logger.error(
        "PROVIDER FAULT: %s answered the same permanent error to %d different recipients in a row "
        "(%s); its circuit breaker is opened, %d messages of this batch go to the next provider or "
        "are retried instead of failing, those already failed are put back",
        provider, settings.NOTIFIER_PROVIDER_FAULT_SAME_ERRORS, fault, held,
    )


def failed_put_back(*, provider: str) -> int:
    """Re-queue the streak's rows already marked FAILED; returns how many were put back.

    Called after a call's results are recorded, so rows another worker marks FAILED a moment
    after the streak completed are caught by that worker's own call (it runs this too).
    """
    key = redis_key("fault", provider, "put_back")
    try:
        held = {int(k): v.decode() for k, v in get_redis().hgetall(key).items()}
    except redis.RedisError as exc:
        logger.warning("could not read put-back list of %s: %s", provider, exc)
        return 0
    if not held:
        return 0
    due, settled = _due_rows(held)
    moved = ledger.failed_messages_requeue(
        message_ids=due, error=f"put back: {FAULT_PREFIX}{provider} answered everyone the same"
    )
    _forget(key, settled | {message_id for message_id, _ in moved})
    _enqueue(moved)
    if moved:
        logger.warning("put back %d messages %s had failed during its fault", len(moved), provider)
    return len(moved)


def _due_rows(held: dict[int, str]) -> tuple[list[int], set[int]]:
    """FAILED rows whose recorded error still has their streak's signature, and the ids no
    longer worth watching (anything but SENDING: a SENDING row may yet be marked FAILED)."""
    rows = EmailMessage.objects.filter(id__in=list(held)).values_list("id", "status", "recipient", "error")
    due, settled = [], set(held)
    for message_id, status, recipient, error in rows:
        if status == Status.SENDING:
            settled.discard(message_id)
        elif status == Status.FAILED and error_signature(error, recipient) == held[message_id]:
            due.append(message_id)
    return due, settled


def _forget(key: str, message_ids: set[int]) -> None:
    if not message_ids:
        return
    try:
        get_redis().hdel(key, *message_ids)
    except redis.RedisError as exc:  # they expire with the key; a second put-back finds nothing
        logger.warning("could not trim put-back list %s: %s", key, exc)


def _enqueue(moved: list[tuple[int, int]]) -> None:
    """Back on their priority's queue once the breaker's cooldown is over."""
    by_priority: dict[int, list[int]] = defaultdict(list)
    for message_id, priority in moved:
        by_priority[priority].append(message_id)
    for priority, ids in by_priority.items():
        messages_enqueue(message_ids=ids, priority=priority,
                         countdown=settings.NOTIFIER_BREAKER_COOLDOWN_SECONDS)
