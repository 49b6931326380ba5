"""python manage.py recount_campaign [ID ...] [--all] [--dry-run]: rebuild event counters."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from campaigns.models import Campaign
from feedback.models import CampaignEventCounter
from feedback.services.counters import COUNTED, campaign_counters_compute, campaign_counters_recount


class Command(BaseCommand):
    help = "Recompute campaign event counters (delivered, opened, ...) from the per-message marks."

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
            if options["dry_run"]:
                counts = campaign_counters_compute(campaign_id=campaign_id)
            else:
                counts = campaign_counters_recount(campaign_id=campaign_id)
            verb = "would be" if options["dry_run"] else "now"
            self.stdout.write(f"[{position}/{len(ids)}] campaign {campaign_id}: {verb} {_words(counts)} "
                              f"(stored: {_words(stored) if stored else 'none'})")


def _words(counts: dict[str, int]) -> str:
    """e.g. "3 delivered, 3 opened, 1 clicked, 0 bounced, ..." in COUNTED's order."""
    return ", ".join(f"{counts.get(name, 0):,} {name.replace('_', ' ')}" for name in COUNTED)


def _require_campaigns(ids: list[int]) -> None:
    """Refuse unknown ids before recounting anything: a counter row for a campaign that does not
    exist broke the foreign key at commit, with a traceback instead of a message."""
    known = set(Campaign.objects.filter(pk__in=ids).values_list("id", flat=True))
    missing = [str(campaign_id) for campaign_id in ids if campaign_id not in known]
    if missing:
        raise CommandError(f"no campaign with id {', '.join(missing)}")
