"""What one message is, as POST /api/v1/messages and each item of POST /api/v1/messages/batch
take it: one serializer for both, so a batch item is validated exactly as a single send.

A batch resolves each distinct template once (`TemplateLookup`): the per-process version cache
still asks Redis for its generation on every lookup, which 500 items would pay 500 times. Each
distinct topic too (`TopicLookup`): one query per topic, not per item.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from django.utils import timezone
from rest_framework import serializers

from audience.models import Stream, Topic
from audience.topic_fields import TopicReferenceField
from audience.topics import topic_for_send
from core.api.fields import ContextField, SafeEmailField, StrictInputMixin
from core.api.metadata import MetadataField
from core.priorities import Priority
from scheduling.inputs import ScheduleInputSerializer, schedule_resolve
from templates.models import TemplateVersion
from templates.rendering import missing_variables
from templates.services import template_version_for_send

Found = TypeVar("Found")


class _OncePerReference(Generic[Found]):
    """Each reference a batch names resolved once (its 400 too, raised again for every item
    that names it)."""

    def __init__(self, resolve: Callable[[str], Found]) -> None:
        self._resolve = resolve
        self._found: dict[str, Found | serializers.ValidationError] = {}

    def __call__(self, reference: str) -> Found:
        if reference not in self._found:
            try:
                self._found[reference] = self._resolve(reference)
            except serializers.ValidationError as exc:
                self._found[reference] = exc
        found = self._found[reference]
        if isinstance(found, serializers.ValidationError):
            raise found
        return found


class TemplateLookup(_OncePerReference[TemplateVersion]):
    """The current version of each template reference a batch names, for one service."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        super().__init__(lambda ref: template_version_for_send(client_id=client_id, reference=ref))


class TopicLookup(_OncePerReference[Topic]):
    """Each topic a batch names (id or name), for one service; its error names `topic`."""

    def __init__(self, client_id: str) -> None:
        super().__init__(lambda reference: topic_for_send(client_id, reference))


class MessageInputSerializer(StrictInputMixin, serializers.Serializer):
    """One message. Its context needs `client_id` and may hold `templates` (a TemplateLookup)
    and `topics` (a TopicLookup)."""

    to = SafeEmailField()
    template = serializers.CharField(max_length=100)
    context = ContextField()
    priority = serializers.ChoiceField(choices=[p.label for p in Priority], default="high")
    idempotency_key = serializers.CharField(max_length=200, required=False)
    schedule = ScheduleInputSerializer(required=False)
    stream = serializers.ChoiceField(
        choices=Stream.values, default=Stream.TRANSACTIONAL.value,
        help_text="transactional (an OTP, a receipt: stopped only by a bounce, a complaint or an "
                  "all-streams suppression) or broadcast (also skipped for a recipient who left "
                  "your broadcast stream or the topic: answered SUPPRESSED).")
    topic = TopicReferenceField(required=False, help_text="broadcast only: a topic of your service, "
                                                          "by id or by name (`GET /api/v1/topics`).")
    metadata = MetadataField()

    def validate_template(self, value: str) -> TemplateVersion:
        lookup = self.context.get("templates")
        if lookup is not None:
            return lookup(value)
        return template_version_for_send(client_id=self.context["client_id"], reference=value)

    def validate(self, attrs: dict) -> dict:
        missing = missing_variables(attrs["template"], attrs["context"])
        if missing:
            raise serializers.ValidationError(
                {"context": [f"Missing variables the template needs: {', '.join(missing)}."]}
            )
        attrs["topic"] = self._topic(attrs)
        now = timezone.now()
        attrs["schedule"] = schedule_resolve(attrs.get("schedule"), recipient=attrs["to"], now=now,
                                             client_id=self.context["client_id"])
        return attrs

    def _topic(self, attrs: dict) -> Topic | None:
        if "topic" not in attrs:
            return None
        if attrs["stream"] != Stream.BROADCAST:
            raise serializers.ValidationError({"topic": [
                'Only broadcast mail has a topic: give "stream": "broadcast" (transactional mail '
                "reaches every recipient who is not suppressed for every stream)."]})
        lookup = self.context.get("topics") or TopicLookup(self.context["client_id"])
        return lookup(attrs["topic"])
