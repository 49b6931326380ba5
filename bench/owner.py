"""The service that owns a benchmark's rows: every template, contact, list and segment has
one (decision 50). Call after django.setup()."""

from __future__ import annotations

from typing import Any


def bench_client(name: str = "bench") -> Any:
    """The oldest service called `name`, created (with a key nobody needs) when there is none."""
    from clients.models import Service
    from clients.services import service_create

    existing = Service.objects.filter(name=name).order_by("created").first()
    return existing or service_create(name=name)[0]
