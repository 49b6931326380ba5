"""Benchmark: POST /api/v1/notifications/email for a 1,000,000-contact segment, p50/p99.

    DATABASE_URL=postgres://... REDIS_URL=redis://... python bench/campaign_api.py [--requests 200]

Runs the whole Django stack in-process (DRF, auth, validation, the audience probe, the INSERT,
the on-commit publish of the fan-out task to the broker), without the HTTP server. Stop the ops
worker first: the script purges the maintenance queue and deletes its campaigns afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    harness.django_setup()
    from rest_framework.test import APIClient

    from audience.models import Contact, Segment
    from campaigns.models import Campaign
    from clients.services import service_create
    from core.priorities import MAINTENANCE_QUEUE
    from notifier.celery import app
    from templates.services import template_create

    client_row, key = service_create(name=f"bench-{time.time()}")
    api = APIClient(HTTP_HOST="127.0.0.1")
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    version = template_create(client=client_row, name=f"bench-api-{int(time.time())}", subject="Hi",
                              html_body="<p>x</p>")
    segment = Segment.objects.create(client=client_row, name=f"bench-all-{time.time()}", definition={
        "conditions": [{"attribute": "orders", "op": "gte", "value": 0}]})
    body = {"template_id": version.template_id, "recipients": {"type": "segment", "segment_id": segment.pk},
            "priority": "low"}
    timings = []
    for _ in range(args.requests):
        started = time.perf_counter()
        response = api.post("/api/v1/notifications/email", body, format="json")
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 202, response.content
    timings.sort()
    p99 = timings[int(len(timings) * 0.99) - 1]
    p50 = statistics.median(timings)
    print(f"contacts={Contact.objects.count()} requests={len(timings)} p50_ms={p50:.1f} "
          f"p99_ms={p99:.1f} max_ms={timings[-1]:.1f}")
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(MAINTENANCE_QUEUE)
    Campaign.objects.filter(client=client_row).delete()
    segment.delete()


if __name__ == "__main__":
    main()
