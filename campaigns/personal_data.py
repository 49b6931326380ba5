"""An inline campaign's addresses, removed after its service's retention (issue 30, decision 130).

A campaign launched with inline recipients keeps the request's rows (address, name, timezone,
per-recipient data) in `Campaign.audience` so its fan-out can resume; once the campaign has
ended (COMPLETED, CANCELLED or FAILED: nothing fans it out or resumes it again) they serve no
one. A step of `clients.personal_data` (campaigns' AppConfig registers it): the ended inline
campaigns whose end (`completed_at`; `created_at` for a row that has none) is older than their
service's broadcast personal-data retention (a deleted service's: the defaults) keep
`{"type": "inline", "client_id": ..., "contacts": [], "count": N}` and get
`personal_data_removed_at`, which takes them out of `campaign_personal_due_idx`: the step is
resumable without a mark and never rewrites a campaign. Segment and list audiences are the
service's references, not personal data: never picked. Counts, statuses, `audience_size` and the
messages (stripped by delivery's step) stay as they were.
"""

from __future__ import annotations

from campaigns.models import ENDED_STATUSES, Campaign
from clients.personal_data import PickAndStrip

STREAM = "broadcast"  # a campaign's mail is the broadcast stream's (audience.models.Stream)
_ENDED = ", ".join(f"'{status}'" for status in ENDED_STATUSES)
# The registered step (campaigns' AppConfig.ready()). `due` is the predicate of
# `campaign_personal_due_idx` (campaigns.models.PERSONAL_DUE) as its index has it.
campaign_audiences_personal_data_step = PickAndStrip(
    "campaign_audiences", STREAM, Campaign._meta.db_table, "c",
    due=(f"c.audience -> 'type' = '\"inline\"'::jsonb AND c.personal_data_removed_at IS NULL "
         f"AND c.status IN ({_ENDED})"),
    end="COALESCE(c.completed_at, c.created_at)",
    strip=("audience = audience || jsonb_build_object('contacts', '[]'::jsonb, 'count', CASE WHEN "
           "jsonb_typeof(audience -> 'contacts') = 'array' THEN jsonb_array_length(audience -> 'contacts') "
           "ELSE 0 END)"))
_PICK = campaign_audiences_personal_data_step.pick_sql
