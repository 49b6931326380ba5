"""Reconciliation of AMBIGUOUS messages: handed to an ESP, no answer recorded.

An AMBIGUOUS message may or may not have been accepted, so it is never resent blindly. Proof
settles it:

- accepted=True: any ESP event for the message (delivered, bounce, open, ...) proves the ESP
  took it. The feedback engineer's webhook processing calls
  `message_reconcile(message_id=..., accepted=True, provider=..., provider_message_id=...)`
  before applying the event; an admin can do the same after checking the ESP's logs.
- accepted=False: an operator has established that the ESP never took it (e.g. its activity
  log has no trace after a day). The message goes back to QUEUED and is sent again (the
  evidence-based re-send, pinned to the provider, is delivery/services/ambiguity.py's).

Both are guarded: only AMBIGUOUS rows (or, for acceptance, rows still SENDING that were already
handed over, when the event beats our own timeout) change, so calling it again or for a message
that already settled is a no-op. Returns whether the row changed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.db import transaction

from delivery.models import AmbiguityRecord, EmailMessage
from delivery.services.ambiguity import ambiguous_message_settle
from delivery.services.dispatch import messages_enqueue
from delivery.services.ledger import ambiguous_message_requeue

logger = logging.getLogger(__name__)
Status = EmailMessage.Status


def message_reconcile(
    *, message_id: int, accepted: bool, provider: str, provider_message_id: str = "",
    evidence: Mapping[str, object] | None = None,
) -> bool:
    """`evidence`: the ESP event that proves acceptance (none: an operator's word). Both are
    written to the ambiguity log (delivery/services/ambiguity.py)."""
    if accepted:
        return _mark_accepted(message_id, provider, provider_message_id, evidence)
    return _resend(message_id, provider)


def _mark_accepted(message_id: int, provider: str, provider_message_id: str,
                   evidence: Mapping[str, object] | None) -> bool:
    return ambiguous_message_settle(message_id=message_id, provider=provider,
                                    provider_message_id=provider_message_id, evidence=evidence)


def _resend(message_id: int, provider: str) -> bool:
    with transaction.atomic():
        priority = ambiguous_message_requeue(message_id=message_id,
                                             error="reconciled: not accepted; sending again")
        if priority is not None:
            AmbiguityRecord.objects.create(message_id=message_id, kind=AmbiguityRecord.Kind.REQUEUED,
                                           reason="operator", provider=provider)
            transaction.on_commit(lambda: messages_enqueue(message_ids=[message_id], priority=priority))
    if priority is not None:
        logger.warning("message %s reconciled as never accepted; sending again", message_id)
    return priority is not None
