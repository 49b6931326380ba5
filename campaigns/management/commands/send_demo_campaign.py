"""python manage.py send_demo_campaign --recipients N [--service NAME]: a first-run demo.

Creates N demo contacts (demo-<i>@example.com) in a list, a demo template, all owned by the
service `--service` names (default: `demo`, the service `make run` creates), launches a campaign
to the list through the same service as the API, and shows its progress from the campaign's
counters until it ends (one line redrawn on a terminal, a plain line now and then otherwise),
then a summary in words. Needs the workers running (`make run`).
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from audience.models import Contact, ContactList
from audience.services.contacts import audience_statistics_refresh
from campaigns.models import Campaign
from campaigns.selectors import campaign_counters
from campaigns.services.launch import campaign_launch
from clients.models import Service
from clients.tenancy import service_by_reference
from core.ops import Progress, command_stderr, progress
from templates.models import Template
from templates.services import template_create

TEMPLATE = "demo-campaign"
FINAL = {Campaign.Status.COMPLETED, Campaign.Status.CANCELLED, Campaign.Status.FAILED}


class Command(BaseCommand):
    help = "Send a demo campaign to N generated contacts and show its progress."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--recipients", type=int, default=1000)
        parser.add_argument("--service", "--client", dest="service", default="demo",
                            help="the service (id, name or a key's prefix) that owns the demo's rows")
        parser.add_argument("--priority", default="low", choices=["critical", "high", "normal", "low"])
        parser.add_argument("--timeout", type=float, default=1800, help="stop watching after this many s")

    def handle(self, *args: object, **options: object) -> None:
        n = int(options["recipients"])
        if not 1 <= n <= 10_000_000:
            raise CommandError("--recipients must be between 1 and 10,000,000")
        try:
            owner = service_by_reference(str(options["service"]))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        contact_list = _demo_list(owner, n)
        campaign = campaign_launch(definition={
            "name": f"demo to {n:,}", "template_id": _demo_template(owner),
            "recipients": {"type": "list", "list_id": contact_list.pk}, "priority": options["priority"],
        }, client_id=owner.pk)
        self.stdout.write(f"campaign {campaign.pk} launched to {n:,} contacts (list {contact_list.name!r})")
        bar = progress(total=n, desc="sending", unit="msg", stream=command_stderr(options))
        self._watch(campaign, n, float(options["timeout"]), bar)

    def _watch(self, campaign: Campaign, n: int, timeout: float, bar: Progress) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            campaign.refresh_from_db()
            _draw(bar, campaign, n)
            if campaign.status in FINAL:
                break
            time.sleep(0.5)
        bar.close()
        self.stdout.write(_summary(campaign, campaign_counters(campaign=campaign)))
        if campaign.status == Campaign.Status.FAILED:
            # A non-zero exit, so a script or CI running the demo notices.
            reason = campaign.metadata.get("failure") or "no reason recorded"
            raise CommandError(f"campaign {campaign.pk} FAILED: {reason}")


def _draw(bar: Progress, campaign: Campaign, n: int) -> None:
    """Progress against the whole audience (the same figure as the dashboard and the API)."""
    counters = campaign_counters(campaign=campaign)
    # The fan-out's count once it has started; until then the size of the list just made.
    bar.total = counters["total"] if campaign.audience_size is not None else n
    # Not redrawn here: the bar redraws at its own pace (advance_to), not at every poll.
    bar.set_postfix_str(", ".join([campaign.status.lower(), *_counts(counters, WATCHED)]), refresh=False)
    bar.advance_to(counters["done"])


# What the bar shows while the campaign runs, and the summary at the end, when not zero (the bar
# keeps its width on an 80-column terminal).
WATCHED = ("queued", "sending", "failed", "cancelled")
SUMMED = ("failed", "suppressed", "ambiguous", "cancelled", "queued", "sending", "scheduled")


def _counts(counters: dict[str, int], names: tuple[str, ...]) -> list[str]:
    return [f"{counters[name]:,} {name}" for name in names if counters[name]]


def _summary(campaign: Campaign, counters: dict[str, int]) -> str:
    """E.g. "campaign 7 completed: 10,000 recipients, 9,990 sent, 10 failed"."""
    parts = [f"{counters['total']:,} recipients", f"{counters['sent']:,} sent", *_counts(counters, SUMMED)]
    return f"campaign {campaign.pk} {campaign.status.lower()}: {', '.join(parts)}"


def _demo_template(owner: Service) -> int:
    template = Template.objects.filter(client=owner, name=TEMPLATE).first()
    if template:
        return template.pk
    return template_create(
        client=owner, name=TEMPLATE, subject="Hello {{ name }}, this is a notifier demo",
        html_body="<h1>Hi {{ name }}</h1><p>This campaign went out to everyone on the demo list.</p>",
    ).template_id


def _demo_list(owner: Service, n: int) -> ContactList:
    """demo-0 .. demo-<n-1>@example.com, created in one statement; members added in another."""
    contact_list, _ = ContactList.objects.get_or_create(client=owner, name=f"demo-{n}")
    table, members = Contact._meta.db_table, ContactList.contacts.through._meta.db_table
    series = "generate_series(0, %s - 1) AS g(x)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (client_id, email, name, timezone, locale, attributes, subscribed, "
            "created_at, updated_at) SELECT %s, 'demo-' || x || '@example.com', 'Demo ' || x, 'UTC', 'en', "
            f"'{{\"demo\": true}}'::jsonb, TRUE, now(), now() FROM {series} "
            "ON CONFLICT (client_id, email) DO NOTHING",
            [owner.pk, n])
        cursor.execute(
            f"INSERT INTO {members} (contactlist_id, contact_id) SELECT %s, c.id FROM {table} c "
            f"WHERE c.client_id = %s AND c.email IN (SELECT 'demo-' || x || '@example.com' FROM {series}) "
            "ON CONFLICT DO NOTHING",
            [contact_list.pk, owner.pk, n])
    audience_statistics_refresh()
    return contact_list
