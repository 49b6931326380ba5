"""Writes on a service's topics: create, change, archive (never delete: decision 107)."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from audience.models import Topic


class TopicNameTakenError(Exception):
    """The service has a topic of this name already (archived ones included: a name keeps the
    meaning it had in the history and in sent mail)."""


def topic_create(
    *, service_id: str, name: str, description: str = "", default_subscribed: bool = True
) -> Topic:
    try:
        with transaction.atomic():
            return Topic.objects.create(client_id=service_id, name=name, description=description,
                                        default_subscribed=default_subscribed)
    except IntegrityError as exc:
        raise TopicNameTakenError(name) from exc


def topic_update(*, topic: Topic, changes: dict) -> Topic:
    """Change the name, description or default of an unarchived topic. A new default applies at
    once to every recipient who made no choice of their own (no history row: nobody changed)."""
    for field, value in changes.items():
        setattr(topic, field, value)
    try:
        with transaction.atomic():
            topic.save(update_fields=[*changes])
    except IntegrityError as exc:
        raise TopicNameTakenError(changes.get("name", topic.name)) from exc
    return topic


def topic_archive(*, topic_id: int) -> bool:
    """Archive the topic: no new send or choice may name it; campaigns, messages, choices and
    history that name it keep it. False when it was archived already (or is no topic)."""
    archived = Topic.objects.filter(pk=topic_id, archived_at__isnull=True).update(archived_at=timezone.now())
    return bool(archived)
