"""Benchmark: the campaign fan-out of a scheduled campaign (local_time or optimal), end to end
in the real service: compile (distinct zones, per-zone instants), chunked INSERT ... SELECT with
the due map joined, ZADD of each chunk into the due set.

    DATABASE_URL=... REDIS_URL=... python bench/campaign_schedule_fanout.py --count 100000 --zones 300 \
        [--type local_time|optimal]

Setup (not timed): COUNT contacts over ZONES IANA timezones. Everything is deleted afterwards
(use a scratch database; stop the scheduler, or it will dispatch nothing until 09:00 anyway).
"""

from __future__ import annotations

import argparse
import sys
import time
import zoneinfo
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.owner import bench_client

harness.django_setup()

from audience.models import Contact  # noqa: E402
from bench.rows import contacts_insert, due_set_remove  # noqa: E402
from campaigns.models import Campaign  # noqa: E402
from campaigns.services.fanout import campaign_fanout  # noqa: E402
from delivery.models import EmailMessage  # noqa: E402
from templates.services import template_create  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--zones", type=int, default=300)
    parser.add_argument("--type", default="local_time", choices=["local_time", "optimal"])
    args = parser.parse_args()
    zones = sorted(zoneinfo.available_timezones())[: args.zones]
    tag = str(int(time.time()))
    contacts_insert(args.count, zones, f"cs{tag}-", {"bench": tag})
    version = template_create(
        client=bench_client(), name=f"bench-cs-{tag}", subject="s", html_body="<p>b</p>")
    schedule = {"type": args.type, "timezone": "UTC"}
    if args.type == "local_time":
        schedule["local_time"] = "09:00:00"
    campaign = Campaign.objects.create(
        name="bench scheduled fan-out", template_version=version, status=Campaign.Status.SCHEDULED,
        audience={"type": "segment", "definition": {"conditions": [
            {"attribute": "bench", "op": "equals", "value": tag}]}}, schedule=schedule)
    try:
        started = time.perf_counter()
        report = campaign_fanout(campaign_id=campaign.pk)
        seconds = time.perf_counter() - started
        rows = EmailMessage.objects.filter(campaign=campaign, status=EmailMessage.Status.SCHEDULED).count()
        print(f"{args.type} campaign fan-out: {rows} SCHEDULED rows ({report.finished=}) in {seconds:.1f}s "
              f"= {rows / seconds:,.0f} rows/s, {len(zones)} zones, due set +{rows}")
    finally:
        ids = list(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True))
        due_set_remove(ids)
        EmailMessage.objects.filter(campaign=campaign).delete()
        Campaign.objects.filter(pk=campaign.pk).delete()
        Contact.objects.filter(email__startswith=f"cs{tag}-").delete()


if __name__ == "__main__":
    main()
