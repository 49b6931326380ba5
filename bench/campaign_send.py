"""Benchmark: campaign send throughput to an SMTP sink through the SMTP provider.

    /usr/sbin/smtp-sink -c -u nobody 127.0.0.1:2525 1000 &          # Postfix's sink
    SMTP_PORT=2525 python -m core.worker low &  (and: python -m core.worker ops &)
    DATABASE_URL=... REDIS_URL=... python bench/campaign_send.py --recipients 100000

Through a batch API instead: start `python bench/fake_esp.py --provider sendgrid` (it prints
its URL) and the workers with `NOTIFIER_PROVIDERS=sendgrid SENDGRID_API_URL=<url>
SENDGRID_API_KEY=bench` (Mailgun: `MAILGUN_API_URL`, `MAILGUN_API_KEY`, `MAILGUN_DOMAIN`).

Launches a campaign to a list of N demo contacts through the launch service and samples the
counters every second; prints the sustained rate (sent/s between 5% and 95% of the audience),
the end-to-end time (launch to last send) and the worker pool's size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--priority", default="low")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    harness.django_setup()
    from bench.owner import bench_client
    from campaigns.management.commands.send_demo_campaign import _demo_list, _demo_template
    from campaigns.models import Campaign
    from campaigns.selectors import campaign_counters
    from campaigns.services.launch import campaign_launch

    n = args.recipients
    owner = bench_client()
    contact_list = _demo_list(owner, n)
    started = time.perf_counter()
    campaign = campaign_launch(definition={
        "template_id": _demo_template(owner), "recipients": {"type": "list", "list_id": contact_list.pk},
        "priority": args.priority}, client_id=owner.pk)
    samples: list[tuple[float, int]] = []
    while time.perf_counter() - started < args.timeout:
        campaign.refresh_from_db()
        counters = campaign_counters(campaign=campaign)
        samples.append((time.perf_counter() - started, counters["sent"]))
        print(f"\r{samples[-1][0]:6.1f}s sent={counters['sent']:,} queued={counters['queued']:,}", end="")
        if campaign.status != Campaign.Status.SENDING and campaign.status != Campaign.Status.QUEUED:
            break
        time.sleep(1)
    print()
    low = next(t for t, sent in samples if sent >= 0.05 * n)
    high = next((t, s) for t, s in samples if s >= 0.95 * n)
    sent_low = next(s for t, s in samples if t == low)
    rate = (high[1] - sent_low) / max(high[0] - low, 1e-6)
    print(f"recipients={n} status={campaign.status} sustained_per_s={rate:,.0f} "
          f"end_to_end_s={samples[-1][0]:.1f} overall_per_s={samples[-1][1] / samples[-1][0]:,.0f}")


if __name__ == "__main__":
    main()
