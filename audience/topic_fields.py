"""How the send APIs take and show a topic (issue 28): a campaign, a recurring definition and a
broadcast message name one by id or by name (audience.topics.topic_for_send resolves it
within the caller's service), and their answers show it as `{id, name}`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

TOPIC_HELP = ("A topic of your service, by id or by name (`GET /api/v1/topics`): recipients who "
              "left it are skipped; an opt-in topic reaches only those who joined it.")


@extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 100}],
                      "description": TOPIC_HELP})
class TopicReferenceField(serializers.CharField):
    """A topic id (a JSON number or a string of digits) or name, as text: topic_for_send looks it
    up in the serializer's `validate`, where its error names the field."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 100)
        kwargs.setdefault("help_text", TOPIC_HELP)
        super().__init__(**kwargs)


class TopicSummarySerializer(serializers.Serializer):
    """The topic a campaign or a message names, in its answer (null: none)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
