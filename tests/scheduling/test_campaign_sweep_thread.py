"""The scheduler's campaign sweep runs beside its tick, not inside it.

After a broker loss the sweep re-publishes every QUEUED row of a big campaign, which took tens
of seconds in the 1M run; inline, it held up due-time dispatch and P0 recovery for that long.
"""

from __future__ import annotations

import time

import pytest

from campaigns.models import Campaign
from campaigns.services.recovery import campaigns_stalled_sends_republish
from core.priorities import queue_for
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from notifier.celery import app as celery_app
from scheduling.management.commands.run_scheduler import Command
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)  # the sweep thread has its own connection
ROWS = 20_000


def _stalled_campaign() -> Campaign:
    version = factories.template_version()
    campaign = Campaign.objects.create(name="big", template_version=version, fanout_done=True,
                                       status=Campaign.Status.SENDING, priority=2)
    EmailMessage.objects.bulk_create(
        EmailMessage(campaign=campaign, recipient=f"b{n}@example.com", template_version=version,
                     priority=2, context={}, idempotency_key=f"big:{n}") for n in range(ROWS))
    get_redis().delete(redis_key("campaigns", "progress", campaign.pk))
    return campaign


def _waiting_tasks() -> int:
    with celery_app.connection_for_read() as conn:
        return conn.default_channel.queue_declare(queue_for(2), passive=True).message_count


def test_a_long_campaign_sweep_does_not_hold_up_the_tick(settings):
    settings.NOTIFIER_REQUEUE_AFTER_SECONDS = 0
    _stalled_campaign()
    celery_app.control.purge()
    assert campaigns_stalled_sends_republish() == 0  # first sight: progress recorded
    command = Command()
    command._next_campaign_sweep, command._sweeper = 0.0, None

    started = time.monotonic()
    sweeper = command._campaign_sweep()
    returned_after = time.monotonic() - started
    assert sweeper is not None and sweeper.is_alive()  # still publishing 20,000 rows...
    assert returned_after < 0.5  # ...while the tick has already moved on
    command._next_campaign_sweep = 0.0
    assert command._campaign_sweep() is None  # never two sweeps at once
    sweeper.join(timeout=120)
    assert _waiting_tasks() == ROWS // 100  # every row published again, in batches of 100
