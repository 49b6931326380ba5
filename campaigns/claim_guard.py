"""The campaigns hook in the send path: a condition the claim UPDATE adds to its WHERE clause.

`delivery/services/ledger/send_path.py::messages_claim` appends `CAMPAIGN_CLAIM_GUARD`, so a worker never
claims a row of a paused or cancelled campaign: pause and cancel take effect at the next claim
(within a batch's time), with no check in the worker code. The task that finds nothing to claim
simply ends; resume re-publishes the rows (campaigns/services/fanout/republish.py). `CAMPAIGN_OPEN_GUARD`
is the same kind of hook for putting a FAILED row back after a provider fault.
"""

from __future__ import annotations

from campaigns.models import Campaign

_TABLE = Campaign._meta.db_table
_STOPPED = ", ".join(f"'{s}'" for s in (Campaign.Status.PAUSED, Campaign.Status.CANCELLED))

# Written against the message table by its full name (the claim UPDATE has no alias).
# Positive: the row's campaign must exist and not be stopped. The message table has no database
# constraint on campaign_id (decision 63), so a chunk committed in a race with the campaign's
# deletion leaves rows naming no campaign; they are never claimed (and no sweep re-publishes
# them: the orphan sweep skips campaign rows, the campaign sweeps start from a campaign).
CAMPAIGN_CLAIM_GUARD = (
    "(delivery_emailmessage.campaign_id IS NULL OR EXISTS (SELECT 1 FROM "
    f"{_TABLE} AS guard_campaign WHERE guard_campaign.id = delivery_emailmessage.campaign_id "
    f"AND guard_campaign.status NOT IN ({_STOPPED})))"
)

# A finished campaign's row stays as it ended: only rows of no campaign or of one still under
# way (a PAUSED one's QUEUED rows wait for resume) may go back to QUEUED
# (delivery/services/ledger/requeues.py::failed_messages_requeue, after a provider fault).
_OPEN = ", ".join(f"'{s}'" for s in (Campaign.Status.QUEUED, Campaign.Status.SENDING, Campaign.Status.PAUSED))
CAMPAIGN_OPEN_GUARD = (
    "(delivery_emailmessage.campaign_id IS NULL OR EXISTS (SELECT 1 FROM "
    f"{_TABLE} AS open_campaign WHERE open_campaign.id = delivery_emailmessage.campaign_id "
    f"AND open_campaign.status IN ({_OPEN})))"
)
