"""Personal-data removal from the messages and what hangs off them (issue 30, decision 120).

A step of `clients.personal_data` (delivery's AppConfig registers it). For each service and
stream, batch after batch, in one transaction each:

- the messages: settled rows created before the stream's cutoff (ledger.personal_data: the pick
  by `msg_personal_due_idx`, locked; then one UPDATE): recipient '' and context {}, a keyed
  hash of the address kept, the address redacted from `error`;
- their provider attempts (`error`: an SMTP answer may quote the address), dead letters (the
  payload's recipient and context; the attempts' and the final error's quotes) and ambiguity
  records (the ESP's evidence);
- whatever the apps above keep about them (delivery.extensions.personal_data_removed: feedback's
  ESP events).

What is never touched: statuses, timestamps, counts, provider ids, the service's metadata and
idempotency keys, the contact link (a contact is the service's audience, not message history),
and rows in flight (QUEUED, SCHEDULED, SENDING, AMBIGUOUS: not in the pick's index).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import cycle, islice
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from clients.personal_data import ExpireRun, Policy
from core.personal_data import recipient_hash, redact, redact_json
from delivery import extensions
from delivery.models import AmbiguityRecord, DeadLetter, DeliveryAttempt
from delivery.services import ledger

_turn = 0  # where the next bounded sweep starts among the policies, so each gets its turn


def _rotated(policies: list[Policy]) -> Iterator[Policy]:
    global _turn
    start = _turn % len(policies) if policies else 0
    _turn += 1
    return islice(cycle(policies), start, start + len(policies))


def messages_personal_data_step(run: ExpireRun) -> dict[str, int]:
    """The registered step: every policy's due messages (counted on a dry run)."""
    removed = 0
    for policy in _rotated(run.policies):
        if run.out_of_time():
            break
        before = policy.cutoff(run.as_of)
        if run.dry_run:
            removed += ledger.messages_personal_data_count(
                service_id=policy.service_id, stream=policy.stream, created_before=before)
            continue
        after = None
        while not run.out_of_time():
            taken, after = messages_personal_data_batch(policy, before=before, limit=run.batch_size,
                                                        after=after)
            removed += taken
            if taken < run.batch_size:
                break
    return {"messages": removed}


def messages_personal_data_batch(policy: Policy, *, before: object, limit: int,
                                 after: tuple | None = None) -> tuple[int, tuple | None]:
    """One batch in one transaction: (how many messages were stripped, the keyset to go on from)."""
    with transaction.atomic():
        due = ledger.messages_personal_data_pick(service_id=policy.service_id, stream=policy.stream,
                                                 created_before=before, limit=limit, after=after)
        if not due:
            return 0, after
        addresses = {row.id: row.recipient for row in due}
        ledger.messages_personal_data_strip(
            rows=[(row.id, recipient_hash(row.recipient), redact(row.error, row.recipient)) for row in due],
            at=timezone.now())
        _attempts_redact(addresses)
        _dead_letters_strip(addresses)
        _ambiguity_evidence_redact(addresses)
        extensions.personal_data_removed(addresses)
    return len(due), (due[-1].created_at, due[-1].id)


def _attempts_redact(addresses: dict[int, str]) -> None:
    """Attempt errors quoting the address (most attempts have no error: only those are read)."""
    rows = DeliveryAttempt.objects.filter(message_id__in=list(addresses), error__contains="@")
    _redact_field(rows.only("id", "message_id", "error"), "error", redact, addresses)


def _dead_letters_strip(addresses: dict[int, str]) -> None:
    rows = list(DeadLetter.objects.filter(message_id__in=list(addresses)))
    for row in rows:
        address = addresses[row.message_id]
        row.payload = {**redact_json(row.payload, address), "recipient": "", "context": {}}
        row.attempts = redact_json(row.attempts, address)
        row.final_error = redact(row.final_error, address)
    DeadLetter.objects.bulk_update(rows, ["payload", "attempts", "final_error"])


def _ambiguity_evidence_redact(addresses: dict[int, str]) -> None:
    rows = AmbiguityRecord.objects.filter(message_id__in=list(addresses)).exclude(evidence={})
    _redact_field(rows, "evidence", redact_json, addresses)


def _redact_field(rows: QuerySet, field: str, redacted: Callable[[Any, str], Any],
                  addresses: dict[int, str]) -> None:
    """Each row's `field` without its message's address; only the rows it changes are written."""
    changed = []
    for row in rows:
        clean = redacted(getattr(row, field), addresses[row.message_id])
        if clean != getattr(row, field):
            setattr(row, field, clean)
            changed.append(row)
    if changed:
        type(changed[0]).objects.bulk_update(changed, [field])
