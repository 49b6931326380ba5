"""What one message is, as POST /api/v1/messages and each item of POST /api/v1/messages/batch
take it: one serializer for both, so a batch item is validated exactly as a single send.

A batch resolves each distinct template once (`TemplateLookup`): the per-process version cache
still asks Redis for its generation on every lookup, which 500 items would pay 500 times.
"""

from __future__ import annotations

from django.utils import timezone
from rest_framework import serializers

from core.api.fields import ContextField, SafeEmailField, StrictInputMixin
from core.priorities import Priority
from scheduling.inputs import ScheduleInputSerializer, schedule_resolve
from templates.models import TemplateVersion
from templates.rendering import missing_variables
from templates.services import template_version_for_send


class TemplateLookup:
    """The current version of each template reference a batch names, looked up once each (a
    missing one's 400 too), for one service."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._found: dict[str, TemplateVersion | serializers.ValidationError] = {}

    def __call__(self, reference: str) -> TemplateVersion:
        if reference not in self._found:
            try:
                self._found[reference] = template_version_for_send(client_id=self.client_id,
                                                                   reference=reference)
            except serializers.ValidationError as exc:
                self._found[reference] = exc
        found = self._found[reference]
        if isinstance(found, serializers.ValidationError):
            raise found
        return found


class MessageInputSerializer(StrictInputMixin, serializers.Serializer):
    """One message. Its context needs `client_id` and may hold `templates` (a TemplateLookup)."""

    to = SafeEmailField()
    template = serializers.CharField(max_length=100)
    context = ContextField()
    priority = serializers.ChoiceField(choices=[p.label for p in Priority], default="high")
    idempotency_key = serializers.CharField(max_length=200, required=False)
    schedule = ScheduleInputSerializer(required=False)

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
        now = timezone.now()
        attrs["schedule"] = schedule_resolve(attrs.get("schedule"), recipient=attrs["to"], now=now,
                                             client_id=self.context["client_id"])
        return attrs
