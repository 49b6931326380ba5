"""The recovery loop reads the broker before re-publishing transactional rows (decision 69): a
backlog whose tasks are still queued is not a loss, and publishing it again only lengthens it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.priorities import Priority, queue_for
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue_by_priority
from delivery.services.recovery import stalled_messages_recover
from notifier.celery import app as celery_app
from tests.factories import email_message, template_version

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
