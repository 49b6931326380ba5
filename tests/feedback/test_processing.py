"""Event processing against real PostgreSQL: idempotent, order-tolerant, guarded statuses,
unique counters, automatic suppression and the reputation guard."""

from __future__ import annotations

import pytest
from django.utils import timezone

from audience.models import Suppression
from campaigns.models import Campaign
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from feedback.models import CampaignEventCounter, EmailEvent, ReputationHold
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from tests.feedback.helpers import T0, campaign, event, sent_messages

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status


def reload(message: EmailMessage) -> EmailMessage:
    return EmailMessage.objects.get(pk=message.pk)


def test_open_before_delivered_yields_delivered_and_opened_with_true_times():
    (message,) = sent_messages(1)
    events_process(events=[event(message, E.OPENED, seconds=60)])
    events_process(events=[event(message, E.DELIVERED, seconds=5)])
    row = reload(message)
    assert row.status == Status.OPENED
    assert row.delivered_at == T0.replace(second=5) and row.opened_at == T0.replace(minute=1)


def test_hard_bounce_and_complaint_are_never_undone():
    bounced, complained = sent_messages(2)
    events_process(events=[event(bounced, E.BOUNCED, bounce="hard"), event(complained, E.COMPLAINED)])
    kinds = (E.DELIVERED, E.OPENED, E.CLICKED)
    later = [event(m, kind, seconds=30) for m in (bounced, complained) for kind in kinds]
    events_process(events=later)
    assert reload(bounced).status == Status.BOUNCED
    assert reload(complained).status == Status.COMPLAINED


def test_precedence_by_rank_not_arrival_order():
    (message,) = sent_messages(1)
    events_process(events=[event(message, E.CLICKED, seconds=90)])
    events_process(events=[event(message, E.OPENED, seconds=60), event(message, E.DELIVERED)])
    row = reload(message)
    assert row.status == Status.CLICKED and row.delivered_at == T0 and row.clicked_at is not None


def test_repeated_events_count_once():
    c = campaign()
    messages = sent_messages(3, campaign_obj=c)
    kinds = (E.DELIVERED, E.OPENED)
    batch = [event(m, kind, event_id=f"{kind.value}-{m.id}") for m in messages for kind in kinds]
    for _ in range(5):
        report = events_process(events=batch + batch)
    assert report.new == 0
    counter = CampaignEventCounter.objects.get(campaign=c)
    assert (counter.delivered, counter.opened, counter.clicked) == (3, 3, 0)
    assert EmailEvent.objects.count() == 6


def test_unique_opens_count_messages_not_events():
    c = campaign()
    (message,) = sent_messages(1, campaign_obj=c)
    events_process(events=[event(message, E.OPENED, seconds=s) for s in (1, 2, 3)])
    counter = CampaignEventCounter.objects.get(campaign=c)
    assert (counter.opened, counter.delivered) == (1, 1)  # an open implies delivery
    assert EmailEvent.objects.filter(event_type="opened").count() == 3


def test_unknown_messages_are_kept_and_reported():
    report = events_process(events=[event(None, E.DELIVERED, provider_message_id="not-ours")])
    assert (report.new, report.unknown) == (1, 1)
    assert EmailEvent.objects.get().message_id is None


def test_falls_back_to_the_provider_message_id():
    (message,) = sent_messages(1)
    stray = event(None, E.DELIVERED, provider_message_id=message.provider_message_id)
    assert events_process(events=[stray]).unknown == 0
    assert reload(message).status == Status.DELIVERED


def test_an_event_for_an_ambiguous_message_proves_acceptance():
    (message,) = sent_messages(1, status=Status.AMBIGUOUS)
    events_process(events=[event(message, E.DELIVERED, provider_message_id="esp-42")])
    row = reload(message)
    assert row.status == Status.DELIVERED and row.provider_message_id == "esp-42"


def test_a_message_still_sending_is_left_for_later():
    (message,) = sent_messages(1, status=Status.SENDING)
    report = events_process(events=[event(message, E.DELIVERED)])
    assert report.still_sending == [message.id]
    assert reload(message).status == Status.SENDING


def test_hard_bounce_complaint_and_unsubscribe_suppress_soft_bounces_count():
    hard, complaint, unsub, soft = sent_messages(4)
    events_process(events=[
        event(hard, E.BOUNCED, bounce="hard", recipient=hard.recipient.upper()),
        event(complaint, E.COMPLAINED),
        event(unsub, E.UNSUBSCRIBED),
        event(soft, E.BOUNCED, bounce="soft"),
        event(soft, E.BOUNCED, bounce="soft", seconds=60),
    ])
    reasons = dict(Suppression.objects.values_list("email", "reason"))
    assert reasons == {hard.recipient: "hard_bounce", complaint.recipient: "complaint",
                       unsub.recipient: "unsubscribe"}
    assert Suppression.objects.get(email=hard.recipient).source.startswith("sendgrid:bounced:")
    events_process(events=[event(soft, E.BOUNCED, bounce="soft", seconds=120)])  # third: threshold 3
    assert Suppression.objects.get(email=soft.recipient).source == "soft-bounce-threshold"
    assert reload(soft).status == Status.SENT  # a soft bounce does not end the message


def test_reputation_guard_pauses_a_campaign_and_says_why(settings):
    settings.FEEDBACK_REPUTATION_MIN_SAMPLE = 100
    c = campaign()
    messages = sent_messages(100, campaign_obj=c)
    now = timezone.now()
    events_process(events=[event(m, E.BOUNCED, bounce="hard", at=now) for m in messages[:2]])  # 2%: at
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.SENDING
    events_process(events=[event(messages[2], E.BOUNCED, bounce="hard", at=now)])  # throttled (5 s)
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.SENDING
    get_redis().delete(redis_key("feedback", "reputation-check", "campaign", c.id))  # time passes
    events_process(events=[event(messages[3], E.BOUNCED, bounce="hard", at=now)])
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.PAUSED
    hold = ReputationHold.objects.get(campaign=c)
    assert hold.metric == "bounce_rate" and hold.sample == 100 and "4.00%" in hold.reason


def test_complaint_rate_threshold_is_far_lower(settings):
    settings.FEEDBACK_REPUTATION_MIN_SAMPLE = 100
    c = campaign()
    messages = sent_messages(100, campaign_obj=c)
    events_process(events=[event(messages[0], E.COMPLAINED, at=timezone.now())])  # 1% > 0.05%
    assert ReputationHold.objects.get(campaign=c).metric == "complaint_rate"
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.PAUSED
