"""Guarded state changes on the send ledger, one SQL statement per batch.

Every change names the state it expects (and, while SENDING, the claim token), so a late or
duplicate worker changes nothing: the database, not Redis or the broker, fences double sends.
RETURNING is used so a single round trip both changes and reports the rows. Only this package
writes a message's status (tests/test_architecture.py).

Its modules, by who changes the rows:
- `send_path`: the batch send path (claim, hand-off mark, SENT and final marks, release, defer);
  `send_reads`: the claims and reads that return rows as a send reads them (`ClaimedMessage`);
  `single_message`: the single-message fast path; `attempts`: the attempt rows.
- `sweeps`: the recovery sweeps (stale claims, stalled sends, lost transactional tasks).
- Changes made from outside the send path, each naming the states it may move from so it races
  safely with the send path: `campaign_rows` (a campaign paused or cancelled, a contact gone),
  `scheduled_rows` (a scheduled message falling due or cancelled), `requeues` (a provider
  fault's rows, an operator's requeue, a reconciliation), `operator_rows` (a message an
  operator cancels in the admin), `reported` (what the ESPs reported), `personal_data` (the
  address and context removed after the service's retention; never a status).
- `sql` and `prepared`: the SQL pieces they share, the per-connection prepared statements.

Callers import the package (`from delivery.services import ledger`, then `ledger.<name>`); every
public name is re-exported here.
"""

from delivery.services.ledger.attempts import attempts_record
from delivery.services.ledger.campaign_rows import (
    campaign_has_unsent,
    campaign_queued_page,
    campaign_unsent_cancel,
    campaign_unstarted_claims_set,
    contact_campaign_messages_suppress,
)
from delivery.services.ledger.events import reported_events_record
from delivery.services.ledger.operator_rows import message_unsent_cancel
from delivery.services.ledger.personal_data import (
    DueMessage,
    messages_personal_data_count,
    messages_personal_data_pick,
    messages_personal_data_strip,
)
from delivery.services.ledger.reported import REPORTED_RANK, reported_statuses_apply
from delivery.services.ledger.requeues import (
    ambiguous_message_requeue,
    ambiguous_messages_resend,
    failed_message_requeue,
    failed_messages_requeue,
    handed_over_message_mark_sent,
)
from delivery.services.ledger.scheduled_rows import scheduled_messages_cancel, scheduled_messages_fence
from delivery.services.ledger.send_path import (
    HandOff,
    messages_claim,
    messages_claim_hand_off,
    messages_defer,
    messages_mark_final,
    messages_mark_provider,
    messages_mark_sent,
    messages_mark_started,
    messages_release,
)
from delivery.services.ledger.send_reads import (
    CONTACT_GONE_ERROR,
    ClaimedMessage,
    messages_claim_for_send,
    messages_queued_read_for_send,
)
from delivery.services.ledger.single_message import (
    message_claim_for_send,
    message_mark_sent_with_attempt,
    message_mark_started,
)
from delivery.services.ledger.sql import without_flush_wait
from delivery.services.ledger.sweeps import (
    Cutoff,
    orphaned_messages_claim_requeue,
    queued_transactional_requeue,
    stale_claims_release,
    stalled_sends_mark_ambiguous,
    stalled_sends_read,
)

__all__ = [
    "CONTACT_GONE_ERROR",
    "REPORTED_RANK",
    "ClaimedMessage",
    "Cutoff",
    "DueMessage",
    "HandOff",
    "ambiguous_message_requeue",
    "ambiguous_messages_resend",
    "attempts_record",
    "campaign_has_unsent",
    "campaign_queued_page",
    "campaign_unsent_cancel",
    "campaign_unstarted_claims_set",
    "contact_campaign_messages_suppress",
    "failed_message_requeue",
    "failed_messages_requeue",
    "handed_over_message_mark_sent",
    "message_claim_for_send",
    "message_mark_sent_with_attempt",
    "message_mark_started",
    "message_unsent_cancel",
    "messages_claim",
    "messages_claim_for_send",
    "messages_claim_hand_off",
    "messages_defer",
    "messages_mark_final",
    "messages_mark_provider",
    "messages_mark_sent",
    "messages_mark_started",
    "messages_personal_data_count",
    "messages_personal_data_pick",
    "messages_personal_data_strip",
    "messages_queued_read_for_send",
    "messages_release",
    "orphaned_messages_claim_requeue",
    "queued_transactional_requeue",
    "reported_events_record",
    "reported_statuses_apply",
    "scheduled_messages_cancel",
    "scheduled_messages_fence",
    "stale_claims_release",
    "stalled_sends_mark_ambiguous",
    "stalled_sends_read",
    "without_flush_wait",
]
