"""An unsubscribe through our own one-click link, counted as its message's unsubscribe event.

Consent applies the unsubscribe (to the mail's topic, or the service's broadcast stream) and
records it in the consent history; this records it as an `unsubscribed` event of the message
that carried the link, so the campaign's counters, minute tally and daily facts count it as they
count an ESP's unsubscribe event: once per message, whichever came first (decision 143).
"""

from __future__ import annotations

from datetime import datetime

from feedback.normalize import EventType, NormalizedEvent
from feedback.services.events import LINK_PROVIDER
from feedback.services.processing import events_process


def link_unsubscribe_record(*, message_id: int, recipient: str, occurred_at: datetime) -> bool:
    """Record the unsubscribe through `message_id`'s link; True if it was the message's first
    unsubscribe. Idempotent: the event's key is the message, so a second click stores nothing.

    Meant for the consent change's own transaction, so the two commit together, durably (no
    relaxed commit: the recipient was told they are unsubscribed)."""
    event = NormalizedEvent(
        provider=LINK_PROVIDER, event_type=EventType.UNSUBSCRIBED, recipient=recipient,
        occurred_at=occurred_at, provider_message_id=None, notifier_message_id=str(message_id),
        provider_event_id=str(message_id), raw={},
    )
    report = events_process(events=[event], check_reputation=False, relax_commit=False)
    return report.new_marks > 0
