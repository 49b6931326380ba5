"""The scheduler's campaign sweep after the Redis broker restarts without persistence: the
campaign's tasks and its progress-check chain are gone. Its rows are published again as soon as
nothing is in flight (not after the stall time), and a campaign with nothing left is completed.

A Redis of its own serves as the broker, restarted for real: its run id changes and its queues
are empty, as after the million-email day's fault.
"""

from __future__ import annotations

import pytest

from campaigns.models import Campaign
from campaigns.services import recovery
from core.priorities import Priority, queue_for
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from tests import factories
from tests.support.brokers import restartable_broker

pytestmark = pytest.mark.django_db
CS, MS = Campaign.Status, EmailMessage.Status


@pytest.fixture
def broker(settings, tmp_path, monkeypatch):
    """The dedicated Redis as this process's broker, and a sweep that has not seen any broker yet."""
    monkeypatch.setattr(recovery, "broker_restarts", recovery.BrokerRestartWatch())
    settings.NOTIFIER_REQUEUE_AFTER_SECONDS = 3600  # the stall rule alone would wait an hour
    with restartable_broker(settings, tmp_path) as server:
        yield server


def _sending_campaign(rows: int, *, status: str = MS.QUEUED) -> Campaign:
    version = factories.template_version()
    campaign = Campaign.objects.create(name="c", template_version=version, status=CS.SENDING,
                                       fanout_done=True, priority=Priority.NORMAL)
    for n in range(rows):
        factories.email_message(version=version, campaign=campaign, priority=Priority.NORMAL,
                                recipient=f"r{n}@example.com", status=status)
    return campaign


def test_a_campaign_active_when_the_broker_restarted_is_published_again_at_once(broker):
    campaign = _sending_campaign(3)
    assert recovery.campaigns_stalled_sends_republish() == 0  # first sight: the stall time runs
    broker.restart()
    assert recovery.campaigns_stalled_sends_republish() == 3
    assert broker.depth(queue_for(Priority.NORMAL)) == 1  # one batch task carries the three rows
    assert recovery.campaigns_stalled_sends_republish() == 0  # once
    assert Campaign.objects.get(pk=campaign.pk).status == CS.SENDING


def test_a_queue_that_survived_the_restart_is_left_alone(broker):
    campaign = _sending_campaign(3)
    assert recovery.campaigns_stalled_sends_republish() == 0
    broker.restart()
    ids = list(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True))
    messages_enqueue(message_ids=ids, priority=Priority.NORMAL)  # e.g. a broker with persistence
    assert recovery.campaigns_stalled_sends_republish() == 0
    assert broker.depth(queue_for(Priority.NORMAL)) == 1
    assert recovery.broker_restarts.awaiting == set()


def test_the_sweep_completes_a_campaign_whose_progress_chain_was_lost(broker):
    done = _sending_campaign(2, status=MS.SENT)
    waiting = _sending_campaign(1)
    recovery.campaigns_stalled_sends_republish()
    assert Campaign.objects.get(pk=done.pk).status == CS.COMPLETED
    assert Campaign.objects.get(pk=waiting.pk).status == CS.SENDING
