"""The recovery loop reads the broker before re-publishing transactional rows (decision 69): a
backlog whose tasks are still queued is not a loss, and publishing it again only lengthens it.
A broker that restarted lost every task: its rows are published again at once (decision 78)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.models import Campaign
from core.broker_queues import BrokerRunWatch
from core.priorities import Priority, queue_for
from delivery.models import EmailMessage
from delivery.services import recovery
from delivery.services.dispatch import messages_enqueue_by_priority
from delivery.services.recovery import stalled_messages_recover
from notifier.celery import app as celery_app
from tests.factories import email_message, template_version
from tests.support.brokers import restartable_broker

pytestmark = pytest.mark.django_db


def _queued_tasks(priority: Priority) -> int:
    with celery_app.connection_for_read() as conn:
        return conn.default_channel.client.llen(queue_for(priority))


def _old_critical_rows(n: int) -> list[EmailMessage]:
    """QUEUED P0 rows accepted a minute ago, far past P0's 5 s re-publish age."""
    version = template_version()
    rows = [email_message(version=version, priority=Priority.CRITICAL) for _ in range(n)]
    EmailMessage.objects.filter(pk__in=[m.pk for m in rows]).update(
        created_at=timezone.now() - timedelta(minutes=1))
    return rows


def test_only_rows_beyond_what_the_broker_holds_are_published_again(purged_queues):
    rows = _old_critical_rows(3)
    newest = sorted(rows, key=lambda m: m.pk)[1:]
    messages_enqueue_by_priority((m.pk, Priority.CRITICAL) for m in newest)  # two still queued
    assert _queued_tasks(Priority.CRITICAL) == 2

    report = stalled_messages_recover()

    assert report.orphans == 1  # the oldest, whose task is gone
    assert _queued_tasks(Priority.CRITICAL) == 3


def test_with_the_queue_empty_every_old_row_is_published_again(purged_queues):
    _old_critical_rows(3)

    assert stalled_messages_recover().orphans == 3
    assert _queued_tasks(Priority.CRITICAL) == 3


@pytest.fixture
def broker(settings, tmp_path, monkeypatch):
    """A Redis of its own as the broker, and a recovery loop that has not seen any broker yet."""
    monkeypatch.setattr(recovery, "_broker_runs", BrokerRunWatch())
    with restartable_broker(settings, tmp_path) as server:
        yield server


def test_after_a_broker_restart_every_queued_transactional_row_is_published_again_at_once(broker):
    version = template_version()
    young = [email_message(version=version, priority=p) for p in (Priority.CRITICAL, Priority.HIGH)]
    claimed = email_message(version=version, priority=Priority.CRITICAL, status=EmailMessage.Status.SENDING,
                            claimed_at=timezone.now())
    campaign = Campaign.objects.create(name="c", template_version=version, status=Campaign.Status.SENDING)
    of_a_campaign = email_message(version=version, priority=Priority.CRITICAL, campaign=campaign)
    assert stalled_messages_recover().orphans == 0  # first look: the broker's id; rows too young

    broker.restart()
    report = stalled_messages_recover()

    assert report.orphans == 2
    assert broker.depth(queue_for(Priority.CRITICAL)) == 1 and broker.depth(queue_for(Priority.HIGH)) == 1
    assert set(EmailMessage.objects.filter(requeued_at__isnull=False).values_list("pk", flat=True)) == {
        m.pk for m in young}
    assert {claimed.pk, of_a_campaign.pk}.isdisjoint(
        EmailMessage.objects.filter(requeued_at__isnull=False).values_list("pk", flat=True))
    assert stalled_messages_recover().orphans == 0  # once per restart; the age rule again after
