"""Consent writes: a recipient leaves or joins a service's broadcast stream or one of its topics.

Every change that changes something is recorded (ConsentChange) with its source; a repeat of
the current state changes nothing and records nothing, so the history and the per-topic counts
are exact however often a link is clicked or an event repeated. States are by address
(lower-cased, as contacts and suppressions), so a recipient who is no contact has them too.
Transactional mail is never stopped by any of this (decision 106): only an all-streams
suppression (a hard bounce, a complaint, a legal request) stops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from audience.models import ConsentChange, Contact, Suppression, Topic, TopicSubscription
from eventlog.payloads import recipient_data
from eventlog.types import EventType
from eventlog.writes import NewEvent, events_record

Source = ConsentChange.Source
SUBSCRIPTION_TABLE = TopicSubscription._meta.db_table
SUPPRESSION_TABLE = Suppression._meta.db_table


class ConsentRefusedError(Exception):
    """A change the address's standing forbids: it is suppressed for every stream (a hard bounce,
    a complaint, a legal request), and no subscription brings its mail back. `reason` is that
    suppression's reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the address is suppressed for every stream ({reason}); "
                         "no subscription can bring its mail back")


@dataclass(frozen=True)
class ConsentSubject:
    """Whose consent: a service's recipient, by lower-cased address."""

    service_id: str
    email: str

    @classmethod
    def of(cls, service_id: str, email: str) -> ConsentSubject:
        return cls(service_id, email.strip().lower())


def topic_subscription_set(
    *, subject: ConsentSubject, topic: Topic, subscribed: bool, source: str,
    campaign_id: int | None = None, at: datetime | None = None,
) -> bool:
    """Record the recipient's choice for `topic` (the service's own: callers look it up within
    the service); True when it changed what they get. Joining is refused for an address
    suppressed for every stream (ConsentRefusedError)."""
    if topic.client_id != subject.service_id:
        raise ValueError("a topic of another service")
    if subscribed:
        _refuse_if_suppressed_everywhere(subject)
    at = at or timezone.now()
    with transaction.atomic():
        if _topic_state_locked(subject, topic, at) == subscribed:
            return False
        TopicSubscription.objects.filter(topic=topic, email=subject.email).update(
            subscribed=subscribed, updated_at=at)
        _record(subject, topic, subscribed, source, campaign_id, at)
        return True


def broadcast_unsubscribe(
    *, subject: ConsentSubject, source: str, campaign_id: int | None = None, sandbox: bool = False,
    detail: str = "", at: datetime | None = None,
) -> bool:
    """The recipient leaves the service's whole broadcast stream: a broadcast-scope suppression
    (listed by the service's suppressions API; `detail`, e.g. the ESP event, is its `source`)
    and the contact's `subscribed` flag. True when this call changed it."""
    at = at or timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {SUPPRESSION_TABLE} "
                "(email, reason, scope, sandbox, source, client_id, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                [subject.email, Suppression.Reason.UNSUBSCRIBE, Suppression.Scope.BROADCAST, sandbox,
                 (detail or source)[:100], subject.service_id, at],
            )
            added = cursor.fetchone() is not None
        # A contact imported with `subscribed: false` has no suppression yet: the flag's change
        # is a change of state too, and is recorded like the suppression's.
        flagged = _contacts(subject).filter(subscribed=True).update(subscribed=False, updated_at=at)
        changed = added or bool(flagged)
        if changed and not sandbox:
            _record(subject, None, False, source, campaign_id, at)
        return changed


def broadcast_resubscribe(*, subject: ConsentSubject, source: str, at: datetime | None = None) -> bool:
    """The recipient comes back to the service's broadcast stream (their own choice on the
    preference page, or the service on their word). Refused for an address suppressed for every
    stream. True when this call changed it."""
    _refuse_if_suppressed_everywhere(subject)
    at = at or timezone.now()
    with transaction.atomic():
        removed, _ = Suppression.objects.filter(
            email=subject.email, client_id=subject.service_id, scope=Suppression.Scope.BROADCAST,
            sandbox=False).delete()
        flagged = _contacts(subject).filter(subscribed=False).update(subscribed=True, updated_at=at)
        changed = bool(removed) or bool(flagged)
        if changed:
            _record(subject, None, True, source, None, at)
        return changed


def everywhere_suppression_reason(subject: ConsentSubject) -> str | None:
    """The reason of the address's all-streams suppression, if it has one."""
    return (Suppression.objects.filter(email=subject.email, sandbox=False, scope=Suppression.Scope.ALL)
            .values_list("reason", flat=True).first())


def _contacts(subject: ConsentSubject) -> QuerySet[Contact]:
    return Contact.objects.filter(client_id=subject.service_id, email=subject.email)


def _refuse_if_suppressed_everywhere(subject: ConsentSubject) -> None:
    reason = everywhere_suppression_reason(subject)
    if reason is not None:
        raise ConsentRefusedError(reason)


def _topic_state_locked(subject: ConsentSubject, topic: Topic, at: datetime) -> bool:
    """The recipient's state for the topic, its row locked until the commit, so that concurrent
    changes are decided (and recorded) one after the other. A recipient with no choice yet gets
    a row in the topic's default state first: two first choices meet on its unique index, the
    second waits for the first to commit and then reads what it chose."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {SUBSCRIPTION_TABLE} (topic_id, email, subscribed, updated_at) "
            "VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (topic_id, email) DO NOTHING",
            [topic.pk, subject.email, topic.default_subscribed, at],
        )
    return (TopicSubscription.objects.select_for_update().filter(topic=topic, email=subject.email)
            .values_list("subscribed", flat=True).get())


def _record(subject: ConsentSubject, topic: Topic | None, subscribed: bool, source: str,
            campaign_id: int | None, at: datetime) -> None:
    """The history row and, in the same transaction, the service's event (decision 115): a
    leave (the broadcast stream or a topic) is recipient.unsubscribed, a join
    recipient.preferences_changed."""
    ConsentChange.objects.create(
        client_id=subject.service_id, email=subject.email, topic=topic, subscribed=subscribed, source=source,
        campaign_id=campaign_id, occurred_at=at,
    )
    events_record([NewEvent(
        service_id=subject.service_id, message_id=None, occurred_at=at,
        type=EventType.PREFERENCES_CHANGED if subscribed else EventType.UNSUBSCRIBED,
        data=recipient_data(recipient=subject.email, topic=topic.name if topic else None,
                            subscribed=subscribed, source=source, campaign_id=campaign_id))])
