"""python manage.py recount_campaign [ID ...] [--all] [--dry-run]: rebuild event counters and the
minute tally the campaign statistics read (decision 125), from the stored events and marks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.core.management.base import BaseCommand, CommandError, CommandParser

from campaigns.models import Campaign
from feedback.models import CampaignEventCounter, CampaignEventMinute
from feedback.services.counters import COUNTED, campaign_counters_compute, campaign_counters_recount
from feedback.services.tally import campaign_tally_compute


class Command(BaseCommand):
    help = ("Recompute campaign event counters (delivered, opened, ...) from the per-message marks, "
            "and the per-minute tally of the campaign statistics from the events and marks.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("campaign_ids", nargs="*", type=int)
        parser.add_argument("--all", action="store_true", help="every campaign")
        parser.add_argument("--dry-run", action="store_true", help="show the new counts only")

    def handle(self, *args: object, **options: object) -> None:
        ids = list(options["campaign_ids"])
        if options["all"]:
            ids = list(Campaign.objects.order_by("id").values_list("id", flat=True))
        if not ids:
            raise CommandError("name campaign ids, or --all")
        _require_campaigns(ids)
        for position, campaign_id in enumerate(ids, 1):
            stored = CampaignEventCounter.objects.filter(campaign_id=campaign_id).values(*COUNTED).first()
            stored_tally = _stored_tally(campaign_id)
            if options["dry_run"]:
                counts = campaign_counters_compute(campaign_id=campaign_id)
                tally = _tally_words(campaign_tally_compute(campaign_id).values())
            else:
                counts = campaign_counters_recount(campaign_id=campaign_id)
                tally = _stored_tally(campaign_id)
            verb = "would be" if options["dry_run"] else "now"
            self.stdout.write(f"[{position}/{len(ids)}] campaign {campaign_id}: {verb} {_words(counts)}; "
                              f"tally {tally} (stored: {_words(stored) if stored else 'none'}; "
                              f"tally {stored_tally})")


def _words(counts: dict[str, int]) -> str:
    """e.g. "3 delivered, 3 opened, 1 clicked, 0 bounced, ..." in COUNTED's order."""
    return ", ".join(f"{counts.get(name, 0):,} {name.replace('_', ' ')}" for name in COUNTED)


def _stored_tally(campaign_id: int) -> str:
    rows = CampaignEventMinute.objects.filter(campaign_id=campaign_id).values_list("events", "firsts")
    return _tally_words(rows)


def _tally_words(rows: Iterable[Sequence[int]]) -> str:
    """e.g. "3,120 rows, 725,004 events, 412,377 firsts" of (events, firsts) rows."""
    count = events = firsts = 0
    for row_events, row_firsts in rows:
        count, events, firsts = count + 1, events + row_events, firsts + row_firsts
    return f"{count:,} rows, {events:,} events, {firsts:,} firsts"


def _require_campaigns(ids: list[int]) -> None:
    """Refuse unknown ids before recounting anything: a counter row for a campaign that does not
    exist broke the foreign key at commit, with a traceback instead of a message."""
    known = set(Campaign.objects.filter(pk__in=ids).values_list("id", flat=True))
    missing = [str(campaign_id) for campaign_id in ids if campaign_id not in known]
    if missing:
        raise CommandError(f"no campaign with id {', '.join(missing)}")
