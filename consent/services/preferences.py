"""The preference page's Save: the recipient's choices applied through the consent services."""

from __future__ import annotations

from django.db import transaction

from audience.models import ConsentChange
from audience.services.consent import (
    ConsentRefusedError,
    ConsentSubject,
    broadcast_resubscribe,
    broadcast_unsubscribe,
    topic_subscription_set,
)
from consent.selectors import Preferences

Source = ConsentChange.Source


def preferences_apply(
    *, subject: ConsentSubject, shown: Preferences, subscribed_topic_ids: set[int], leave_broadcast: bool
) -> int:
    """Apply what the recipient changed on the page (`shown`, as the GET showed it) to those
    topics (one created since is left alone) and to the broadcast stream, all or nothing; the
    number of changes recorded. A choice that would bring mail back to an address suppressed for
    every stream refuses the whole save (ConsentRefusedError) before anything changes; leaving
    stays allowed."""
    changes = [(choice.topic, choice.topic.pk in subscribed_topic_ids) for choice in shown.topics
               if (choice.topic.pk in subscribed_topic_ids) != choice.subscribed]
    joins = [topic for topic, want in changes if want]
    if shown.blocked_reason and (joins or (shown.left_broadcast and not leave_broadcast)):
        raise ConsentRefusedError(shown.blocked_reason)
    changed = 0
    with transaction.atomic():
        for topic, want in changes:
            changed += topic_subscription_set(subject=subject, topic=topic, subscribed=want,
                                              source=Source.PREFERENCE_PAGE)
        if leave_broadcast:
            changed += broadcast_unsubscribe(subject=subject, source=Source.PREFERENCE_PAGE)
        else:
            changed += broadcast_resubscribe(subject=subject, source=Source.PREFERENCE_PAGE) \
                if shown.left_broadcast else 0
    return changed
