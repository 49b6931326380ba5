"""Rows for feedback tests: a campaign with sent messages, and normalised events about them."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from campaigns.models import Campaign
from delivery.models import EmailMessage
from feedback.normalize import EventType, NormalizedEvent
from tests import factories

_ids = itertools.count(1)
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def campaign(*, status: str = Campaign.Status.SENDING, **fields) -> Campaign:
    """A campaign of factories.owner(), the client the `api` fixture's key belongs to."""
    fields = {"client": factories.owner(), **fields}
    return Campaign.objects.create(
        name=f"campaign-{next(_ids)}", template_version=factories.template_version(), status=status, **fields
    )


def sent_messages(count: int, *, campaign_obj: Campaign | None = None, status: str = "SENT",
                  prefix: str = "user") -> list[EmailMessage]:
    version = campaign_obj.template_version if campaign_obj else factories.template_version()
    n = next(_ids)
    rows = [
        EmailMessage(
            campaign=campaign_obj, client=version.template.client,  # the sender, as in production
            recipient=f"{prefix}{n}-{i}@example.com", template_version=version,
            priority=2, idempotency_key=f"fb:{n}:{i}", status=status, provider="sendgrid",
            provider_message_id=f"pm-{n}-{i}", sent_at=timezone.now(),
        )
        for i in range(count)
    ]
    return EmailMessage.objects.bulk_create(rows)


def event(message: EmailMessage | None, kind: EventType, *, at: datetime = T0, seconds: int = 0,
          bounce: str | None = None, event_id: str | None = None, provider: str = "sendgrid",
          recipient: str | None = None, provider_message_id: str | None = None) -> NormalizedEvent:
    return NormalizedEvent(
        provider=provider,  # type: ignore[arg-type]
        event_type=kind,
        recipient=recipient or (message.recipient if message else "nobody@example.com"),
        occurred_at=at + timedelta(seconds=seconds),
        provider_message_id=provider_message_id,
        notifier_message_id=str(message.id) if message else None,
        provider_event_id=event_id or f"{kind.value}-{message.id if message else 'x'}-{next(_ids)}",
        raw={"kind": kind.value},
        bounce_type=bounce if kind is EventType.BOUNCED else None,  # type: ignore[arg-type]
    )
