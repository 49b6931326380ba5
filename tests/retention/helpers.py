"""Shared by the retention tests of the inline addresses an ended campaign keeps in its audience
(decision 130) and a cancelled schedule in its definition (decision 132): one retention step each,
the same rules. `InlineColumn` is what differs between the two; `INLINE_COLUMNS` feeds the tests
that hold for both (tests/retention/test_inline_personal_data.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.db.models import Model
from django.utils import timezone

from campaigns.models import Campaign
from campaigns.personal_data import campaign_audiences_personal_data_step
from clients.personal_data import PickAndStrip
from scheduling.models import Schedule
from scheduling.personal_data import schedule_definitions_personal_data_step
from tests import factories
from tests.feedback.helpers import campaign
from tests.scheduling.support import clear_schedule_keys

CS = Campaign.Status
SS = Schedule.Status
ADDRESSES = ["ada@example.com", "grace@example.com", "edsger@example.com"]


def inline_contacts() -> list[dict]:
    """The rows of an inline audience: every ADDRESSES with a name, a timezone and data."""
    return [{"email": a, "name": a.split("@")[0].title(), "timezone": "Europe/Paris", "data": {"code": a[:3]}}
            for a in ADDRESSES]


def expire(*args: str) -> str:
    """What `expire_data` printed, run with `args`."""
    out = StringIO()
    call_command("expire_data", *args, stdout=out)
    return out.getvalue()


def ended_campaign(days: float, *, status: str = CS.COMPLETED, **fields) -> Campaign:
    """An inline campaign of factories.owner() (unless `client` says) that ended `days` ago."""
    client_id = getattr(fields.get("client"), "pk", None) or factories.owner().pk
    fields.setdefault("audience", {"type": "inline", "client_id": client_id, "contacts": inline_contacts()})
    at = timezone.now() - timedelta(days=days)
    made = campaign(status=status, **fields)
    Campaign.objects.filter(pk=made.pk).update(created_at=at - timedelta(hours=1),
                                                completed_at=at if status in (CS.COMPLETED, CS.CANCELLED,
                                                                              CS.FAILED) else None)
    return Campaign.objects.get(pk=made.pk)


def cancelled_schedule(days: float, *, status: str = SS.CANCELLED, client=None, legacy: bool = False,
                       **fields) -> Schedule:
    """A recurring schedule of factories.owner() (unless `client` says) that was cancelled (or
    last changed, for another status or a `legacy` row without `cancelled_at`) `days` ago."""
    client = client or factories.owner()
    fields.setdefault("definition", {"template_id": 1, "priority": "low", "metadata": {"batch": "b1"},
                                     "schedule": {"type": "immediate"},
                                     "recipients": {"type": "inline", "contacts": inline_contacts()}})
    fields.setdefault("type", Schedule.Type.RECURRING)
    made = Schedule.objects.create(client=client, name="weekly", cron="0 9 * * 1", status=status, **fields)
    at = timezone.now() - timedelta(days=days)
    Schedule.objects.filter(pk=made.pk).update(
        updated_at=at, cancelled_at=at if status == SS.CANCELLED and not legacy else None)
    return Schedule.objects.get(pk=made.pk)


def _nothing_to_clear() -> None:
    """A campaign's scrub touches no Redis key."""


@dataclass(frozen=True)
class InlineColumn:
    """A JSON column that holds inline addresses until its retention step strips them."""

    model: type[Model]
    column: str
    step: PickAndStrip
    # make(days, client=None): a row of the step's kind whose end is `days` ago.
    make: Callable[..., Model]
    # Its index of the rows still due (the pick must read it, not the table).
    due_index: str
    # How the pick test turns copies of a due row into rows that are not due.
    not_due_copies: dict[str, str]
    # What a dry run over three due rows of this kind prints (its count among the others).
    dry_run_line: str
    # Shared state a test of this kind starts and ends without.
    clear_keys: Callable[[], None] = field(default=_nothing_to_clear)

    @property
    def label(self) -> str:
        """How expire_data names the step's count ("campaign audiences")."""
        return self.step.what.replace("_", " ")

    def scrubbed(self, made: Model) -> bool:
        """Whether `made` (as stored now) lost its addresses, checking that the stamp agrees."""
        row = self.model.objects.get(pk=made.pk)
        value = getattr(row, self.column)
        holds = any(address in json.dumps(value) for address in ADDRESSES)
        assert holds == (row.personal_data_removed_at is None), (value, row.personal_data_removed_at)
        return not holds


CAMPAIGN_AUDIENCES = InlineColumn(
    model=Campaign, column="audience", step=campaign_audiences_personal_data_step, make=ended_campaign,
    due_index="campaign_personal_due_idx",
    # Every other copy a segment campaign (a reference, never due), all of them already scrubbed.
    not_due_copies={"personal_data_removed_at": "now()",
                    "audience": ("CASE WHEN g %% 2 = 0 THEN audience "
                                 "ELSE '{\"type\": \"segment\"}'::jsonb END")},
    dry_run_line="0 webhook bodies, 3 campaign audiences, 0 schedule definitions (as of")

SCHEDULE_DEFINITIONS = InlineColumn(
    model=Schedule, column="definition", step=schedule_definitions_personal_data_step,
    make=cancelled_schedule,
    due_index="schedule_personal_due_idx",
    # Every other copy an active schedule (it may still fire), all of them already scrubbed.
    not_due_copies={"personal_data_removed_at": "now()",
                    "status": "CASE WHEN g %% 2 = 0 THEN status ELSE 'active' END"},
    dry_run_line="0 campaign audiences, 3 schedule definitions (as of",
    clear_keys=clear_schedule_keys)

INLINE_COLUMNS = [CAMPAIGN_AUDIENCES, SCHEDULE_DEFINITIONS]
