"""Reads on consent: the topic a send or a choice names, a recipient's state per topic and in the
broadcast stream, and their history.

A topic is named by its id or its name (a name is never digits only, so the two never meet),
always within one service, and only while it is not archived: an archived topic keeps its rows
and its history, but no new send and no new choice may name it (decision 107).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rest_framework import serializers

from audience.models import ConsentChange, Suppression, Topic, TopicSubscription

MAX_BIGINT_DIGITS = 18
HISTORY_LIMIT = 100


def topic_lookup(*, service_id: str, reference: str | int) -> Topic | None:
    """The service's own, unarchived topic that `reference` (an id or a name) names, or None."""
    topics = Topic.objects.filter(client_id=service_id, archived_at__isnull=True)
    text = str(reference).strip()
    if text.isascii() and text.isdigit():
        if len(text) > MAX_BIGINT_DIGITS:  # beyond bigint: no such id (and no DataError)
            return None
        return topics.filter(pk=int(text)).first()
    return topics.filter(name=text).first()


def topic_unknown_message(reference: str | int) -> str:
    return f"No topic {str(reference)!r} (GET /api/v1/topics lists the service's topics)."


def topic_for_send(service: object, reference: str | int, *, field: str = "topic") -> Topic:
    """The topic a send (a campaign, a schedule, a one-off or batch broadcast) names by id or
    name: the service's own and not archived. Otherwise a ValidationError naming `field` (pass
    the JSON path the caller used, e.g. `definition.topic` or `messages[3].topic`), the same
    answer for a missing, an archived and another service's topic, so an id leaks nothing.
    `service` is the Service (or its id)."""
    if isinstance(reference, bool) or not isinstance(reference, int | str) or not str(reference).strip():
        raise serializers.ValidationError({field: ["A topic id or name is required."]})
    service_id = str(getattr(service, "pk", service))
    topic = topic_lookup(service_id=service_id, reference=reference)
    if topic is None:
        raise serializers.ValidationError({field: [topic_unknown_message(reference)]})
    return topic


def topics_by_reference(*, service_id: str, references: Iterable[str]) -> dict[str, Topic | None]:
    """Each reference (id or name) -> the service's unarchived topic it names, or None; one query."""
    references = list(references)
    topics = list(Topic.objects.filter(client_id=service_id, archived_at__isnull=True))
    by_id = {str(topic.pk): topic for topic in topics}
    by_name = {topic.name: topic for topic in topics}
    found: dict[str, Topic | None] = {}
    for reference in references:
        text = str(reference).strip()
        found[reference] = by_id.get(text) if text.isascii() and text.isdigit() else by_name.get(text)
    return found


@dataclass(frozen=True)
class TopicState:
    """A recipient's state for one topic: `chosen` when it is their own choice, else the default."""

    topic: Topic
    subscribed: bool
    chosen: bool


def topic_states(*, service_id: str, email: str) -> list[TopicState]:
    """The recipient's state for each of the service's unarchived topics, by name; two queries."""
    topics = list(Topic.objects.filter(client_id=service_id, archived_at__isnull=True).order_by("name", "id"))
    choices = dict(TopicSubscription.objects.filter(topic__in=[t.pk for t in topics], email=email.lower())
                   .values_list("topic_id", "subscribed"))
    return [TopicState(topic, choices.get(topic.pk, topic.default_subscribed), topic.pk in choices)
            for topic in topics]


def consent_history(*, service_id: str, email: str, limit: int = HISTORY_LIMIT) -> list[ConsentChange]:
    """The recipient's latest changes for the service, newest first (the history index)."""
    return list(ConsentChange.objects.filter(client_id=service_id, email=email.lower())
                .select_related("topic").order_by("-occurred_at", "-id")[:limit])


def broadcast_suppressed(*, service_id: str, email: str) -> bool:
    """Has the recipient left the service's broadcast stream (a live broadcast-scope suppression)?"""
    return Suppression.objects.filter(email=email.lower(), client_id=service_id, sandbox=False,
                                      scope=Suppression.Scope.BROADCAST).exists()
