"""Events older than NOTIFIER_EVENT_LOG_DAYS are deleted in batches, by the scheduler's sweep
and by purge_messages; newer ones, of every service, stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from clients.services import service_create
from eventlog import expiry
from eventlog.models import ServiceEvent
from scheduling import extensions
from tests import factories

pytestmark = pytest.mark.django_db


def _events(service_id: str, count: int, *, age_days: float) -> set[int]:
    rows = ServiceEvent.objects.bulk_create(
        ServiceEvent(service_id=service_id, type="message.sent", message_id=n, occurred_at=timezone.now())
        for n in range(count))
    ids = {row.id for row in rows}
    ServiceEvent.objects.filter(id__in=ids).update(recorded_at=timezone.now() - timedelta(days=age_days))
    return ids


def _kept() -> set[int]:
    return set(ServiceEvent.objects.values_list("id", flat=True))


def test_only_events_past_the_retention_are_deleted_batch_by_batch(settings) -> None:
    settings.NOTIFIER_EVENT_LOG_DAYS = 30
    other, _ = service_create(name="other")
    _events(factories.owner().pk, 7, age_days=31)
    _events(other.pk, 4, age_days=45)
    young = _events(factories.owner().pk, 3, age_days=29) | _events(other.pk, 2, age_days=0)
    assert expiry.events_expire(older_than=expiry.expiry_cutoff(), batch_size=3, max_batches=2) == 6
    assert expiry.events_expire(older_than=expiry.expiry_cutoff(), batch_size=3) == 5
    assert _kept() == young


def test_the_scheduler_sweep_expires_at_most_once_a_minute(settings) -> None:
    settings.NOTIFIER_EVENT_LOG_DAYS = 30
    expiry._sweep_throttle.reset()
    young = _events(factories.owner().pk, 2, age_days=1)
    _events(factories.owner().pk, 3, age_days=40)
    extensions.run_sweeps()  # registered by scheduling's AppConfig
    assert _kept() == young
    _events(factories.owner().pk, 1, age_days=40)
    extensions.run_sweeps()  # within the minute: the step waits for the next one
    assert len(_kept()) == 3


def test_purge_messages_expires_the_log_too(settings) -> None:
    settings.NOTIFIER_EVENT_LOG_DAYS = 10
    young = _events(factories.owner().pk, 2, age_days=9)
    _events(factories.owner().pk, 5, age_days=11)
    call_command("purge_messages", "--older-than", "30", "--quiet", "--batch-size", "2")
    assert _kept() == young
