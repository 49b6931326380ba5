"""Reputation guard: pause a campaign, or hold a service, whose bounce or complaint rate is
too high, and record why (ReputationHold).

Rates are hard bounces (resp. complaints) over messages sent, over a rolling window
(`FEEDBACK_REPUTATION_WINDOW_SECONDS`) and only once a minimum sample was sent. Defaults sit
well below the levels where SES puts an account under review (5% bounces, 0.1% complaints:
SES developer guide, "Reputation metrics"). A check runs at most once per
`FEEDBACK_REPUTATION_CHECK_SECONDS` per sender (Redis `SET NX EX`):

    notifier:feedback:reputation-check:campaign:<id>   throttle key (string, TTL)
    notifier:feedback:reputation-check:client:<id>
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from clients.key_types import KeyType
from core.redis_client import get_redis, redis_key
from delivery.models import EmailMessage
from feedback import extensions
from feedback.models import MessageEventMark, ReputationHold

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rates:
    sent: int
    bounced: int
    complained: int

    def breach(self) -> tuple[str, float, float] | None:
        """(metric, rate, threshold) of the first threshold crossed, if any."""
        if self.sent < settings.FEEDBACK_REPUTATION_MIN_SAMPLE:
            return None
        checks = (
            ("complaint_rate", self.complained / self.sent, settings.FEEDBACK_COMPLAINT_RATE_THRESHOLD),
            ("bounce_rate", self.bounced / self.sent, settings.FEEDBACK_BOUNCE_RATE_THRESHOLD),
        )
        return next(((m, r, t) for m, r, t in checks if r > t), None)


def sender_rates(*, campaign_id: int | None = None, client_id: str | None = None) -> Rates:
    since = timezone.now() - timedelta(seconds=settings.FEEDBACK_REPUTATION_WINDOW_SECONDS)
    scope = {"campaign_id": campaign_id} if campaign_id is not None else {"client_id": client_id}
    sends = EmailMessage.objects.filter(sent_at__gte=since, **scope)
    bad_marks = MessageEventMark.objects.filter(
        first_at__gte=since, event_type__in=("bounced", "complained"),
        **{f"message__{k}": v for k, v in scope.items()},
    )
    if campaign_id is None:  # a client's live reputation: its test key's messages do not count
        sends = sends.exclude(key_type=KeyType.TEST)
        bad_marks = bad_marks.exclude(message__key_type=KeyType.TEST)
    sent = sends.count()
    marks = bad_marks.aggregate(
        bounced=Count("id", filter=Q(event_type="bounced")),
        complained=Count("id", filter=Q(event_type="complained")),
    )
    return Rates(sent=sent, bounced=marks["bounced"], complained=marks["complained"])


def reputation_check(
    *, campaign_ids: Iterable[int] = (), client_ids: Iterable[str] = ()
) -> list[ReputationHold]:
    """Check each sender (throttled); pause/hold and record those past a threshold."""
    holds = []
    for campaign_id in sorted(set(campaign_ids)):
        if _due("campaign", campaign_id):
            hold = _judge(ReputationHold.Scope.CAMPAIGN, sender_rates(campaign_id=campaign_id), campaign_id)
            holds += [hold] if hold else []
    for client_id in sorted(set(client_ids)):
        if _due("client", client_id):
            hold = _judge(ReputationHold.Scope.CLIENT, sender_rates(client_id=client_id), client_id)
            holds += [hold] if hold else []
    return holds


def client_on_hold(*, client_id: str) -> bool:
    """Whether the guard holds this service (for the send path / API to consult)."""
    return ReputationHold.objects.filter(
        scope=ReputationHold.Scope.CLIENT, client_id=client_id, released_at__isnull=True
    ).exists()


def _judge(scope: str, rates: Rates, sender: int | str) -> ReputationHold | None:
    breach = rates.breach()
    if breach is None:
        return None
    metric, rate, threshold = breach
    is_campaign = scope == ReputationHold.Scope.CAMPAIGN
    who = {"campaign_id": sender} if is_campaign else {"client_id": sender}
    open_holds = ReputationHold.objects.filter(scope=scope, released_at__isnull=True, **who)
    if open_holds.exists():
        return None
    reason = (
        f"{scope} {sender} paused by the reputation guard: {metric.replace('_', ' ')} {rate:.2%} "
        f"over {rates.sent} sends exceeds {threshold:.2%}"
    )
    hold = ReputationHold.objects.create(
        scope=scope, metric=metric, rate=rate, threshold=threshold, sample=rates.sent, reason=reason, **who,
    )
    if is_campaign:
        extensions.campaign_pause(int(sender), reason)  # campaigns registers the pause
    logger.warning(reason)
    return hold


def _due(kind: str, sender: int | str) -> bool:
    key = redis_key("feedback", "reputation-check", kind, sender)
    return bool(get_redis().set(key, 1, nx=True, ex=max(1, settings.FEEDBACK_REPUTATION_CHECK_SECONDS)))
