"""A cancelled schedule's inline addresses, removed after its service's retention (issue 30,
decision 132).

A recurring schedule created with inline recipients keeps the request's rows (address, name,
timezone, per-recipient data) in `Schedule.definition["recipients"]` so each run can launch them.
Once it is cancelled it can never fire again (its beat task is deleted and a run claims only an
ACTIVE schedule; a paused one may be resumed and is never picked); recurring schedules have no
other end. One-off schedule records store no definition (`{}`): never picked. A step of
`clients.personal_data` (SchedulingConfig registers it): the cancelled schedules whose
cancellation (`cancelled_at`; `updated_at` for a row cancelled before that column) is older than
their service's broadcast personal-data retention (a deleted service's: the defaults) keep
`recipients = {"type": "inline", "client_id": ..., "contacts": [], "count": N}` (the rest of the
definition: template, priority, topic, metadata, as it was) and get `personal_data_removed_at`,
which takes them out of `schedule_personal_due_idx`: resumable without a mark, never rewritten.
"""

from __future__ import annotations

from audience.models import Stream
from clients.personal_data import PickAndStrip
from scheduling.models import Schedule

# Every run of a schedule launches a campaign (campaigns registers the launcher), and a
# campaign's mail is the broadcast stream's; a definition names no stream of its own.
STREAM = Stream.BROADCAST
# The registered step (scheduling's AppConfig.ready()). `due` is the predicate of
# `schedule_personal_due_idx` (scheduling.models.PERSONAL_DUE) as its index has it; the strip is
# raw SQL, not save(): `updated_at` (the fallback clock) stays as it was.
schedule_definitions_personal_data_step = PickAndStrip(
    "schedule_definitions", STREAM, Schedule._meta.db_table, "s",
    due=("(s.definition #> ARRAY['recipients','type']) = '\"inline\"'::jsonb "
         f"AND s.personal_data_removed_at IS NULL AND s.status = '{Schedule.Status.CANCELLED.value}'"),
    end="COALESCE(s.cancelled_at, s.updated_at)",
    strip=("definition = jsonb_set(definition, '{recipients}', (definition -> 'recipients') || "
           "jsonb_build_object('contacts', '[]'::jsonb, 'count', CASE WHEN jsonb_typeof(definition #> "
           "'{recipients,contacts}') = 'array' "
           "THEN jsonb_array_length(definition #> '{recipients,contacts}') ELSE 0 END))"))
_PICK = schedule_definitions_personal_data_step.pick_sql
