"""The preference page's Save: what the recipient changed, applied as the API's PUT applies a
service's choices (audience.services.preferences)."""

from __future__ import annotations

from audience.models import ConsentChange
from audience.services.consent import ConsentRefusedError, ConsentSubject
from audience.services.preferences import preferences_set
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
    broadcast = False if leave_broadcast else (True if shown.left_broadcast else None)
    return preferences_set(subject=subject, source=Source.PREFERENCE_PAGE, topics=dict(changes),
                           broadcast=broadcast)
