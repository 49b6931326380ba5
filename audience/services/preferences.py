"""A service sets a recipient's preferences in one request: the broadcast stream and any of its
topics, all or nothing (the API's PUT /contacts/{id}/preferences).

Each change goes through the consent services (audience.services.consent), so a repeat of the
current state records nothing and a re-subscription of an address suppressed for every stream
is refused (ConsentRefusedError) with nothing written.
"""

from __future__ import annotations

from django.db import transaction

from audience.models import Topic
from audience.services.consent import (
    ConsentSubject,
    broadcast_resubscribe,
    broadcast_unsubscribe,
    topic_subscription_set,
)


def preferences_set(
    *, subject: ConsentSubject, source: str, broadcast: bool | None = None,
    topics: dict[Topic, bool] | None = None,
) -> int:
    """Apply the choices (`broadcast` None: unchanged; `topics`: the service's own, resolved by
    the caller); the number of changes recorded. Raises ConsentRefusedError, and then nothing
    is changed, when one of them subscribes an address suppressed for every stream."""
    changed = 0
    with transaction.atomic():
        for topic, subscribed in sorted((topics or {}).items(), key=lambda item: item[0].pk):
            changed += topic_subscription_set(subject=subject, topic=topic, subscribed=subscribed,
                                              source=source)
        if broadcast is True:
            changed += broadcast_resubscribe(subject=subject, source=source)
        elif broadcast is False:
            changed += broadcast_unsubscribe(subject=subject, source=source)
    return changed
