"""Consent for the service: its topics, and one recipient's preferences with their history.

    GET    /api/v1/topics                          the service's topics (?archived=true: archived ones)
    POST   /api/v1/topics                          create one                        Idempotency-Key
    GET    /api/v1/topics/{id}                     one topic
    PATCH  /api/v1/topics/{id}                     change its name, description or default
    DELETE /api/v1/topics/{id}                     archive it (never deleted: decision 107)
    GET    /api/v1/contacts/{contact}/preferences  broadcast, topics, suppression, history
    PUT    /api/v1/contacts/{contact}/preferences  change them, all or nothing (source api)

Scope `campaigns`, as the contacts, lists and suppressions: consent is about broadcast mail.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audience.models import ConsentChange, Contact, Topic
from audience.services.consent import ConsentRefusedError, ConsentSubject, everywhere_suppression_reason
from audience.services.preferences import preferences_set
from audience.services.topics import TopicNameTakenError, topic_archive, topic_create, topic_update
from audience.topics import (
    broadcast_suppressed,
    consent_history,
    topic_states,
    topic_unknown_message,
    topics_by_reference,
)
from audience.validation import MAX_TOPIC_CHOICES
from clients.idempotency import idempotent
from clients.tenancy import owned, owned_or_404
from core.api.errors import Conflict
from core.api.fields import SafeLineField, StrictInputMixin
from core.api.schema import error_response

PAGE_SIZE = 100
NAME_TAKEN = "The service has a topic of this name (archived ones included)."


# --- topics -----------------------------------------------------------------------------------


class TopicSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    default_subscribed = serializers.BooleanField(
        help_text="The state of a recipient who made no choice of their own.")
    archived_at = serializers.DateTimeField(allow_null=True, help_text="null: in use.")
    created_at = serializers.DateTimeField()


class TopicInputSerializer(StrictInputMixin, serializers.Serializer):
    name = SafeLineField(max_length=100, help_text="Unique in the service; not digits only (ids are).")
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    default_subscribed = serializers.BooleanField(
        required=False, default=True,
        help_text="true: everyone gets it until they leave it (opt-out); false: only who joins (opt-in).")

    def validate_name(self, value: str) -> str:
        value = value.strip()
        if not value:
            raise serializers.ValidationError("This field may not be blank.")
        if value.isascii() and value.isdigit():
            raise serializers.ValidationError("A topic's name is not digits only: a send names a topic "
                                              "by its id or its name.")
        service_id = self.context["service_id"]
        same = Topic.objects.filter(client_id=service_id, name=value).exclude(pk=self.context.get("topic_id"))
        if same.exists():
            raise serializers.ValidationError(NAME_TAKEN)
        return value


class TopicPatchSerializer(TopicInputSerializer):
    """Every field optional: only those given change."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, partial=True, **kwargs)


TOPIC_EXAMPLE = {"name": "product-news", "description": "New features, once a month.",
                 "default_subscribed": True}


def _own_topic(request: Request, topic_id: int) -> Topic:
    return owned_or_404(Topic.objects.all(), request.user, message=f"No topic {topic_id}.", pk=topic_id)


def _name_taken(exc: TopicNameTakenError) -> serializers.ValidationError:
    return serializers.ValidationError({"name": [NAME_TAKEN]})


class TopicListApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class QuerySerializer(StrictInputMixin, serializers.Serializer):
        archived = serializers.BooleanField(required=False, default=False,
                                            help_text="true: the archived topics instead.")
        after = serializers.IntegerField(required=False, min_value=0, max_value=2**63 - 1,
                                         help_text="`next_after` of the previous page.")

    class PageSerializer(serializers.Serializer):
        results = TopicSerializer(many=True, help_text=f"{PAGE_SIZE} per page, oldest first.")
        next_after = serializers.IntegerField(allow_null=True, help_text="null on the last page.")

    @extend_schema(operation_id="topics_list", parameters=[QuerySerializer], responses={200: PageSerializer})
    def get(self, request: Request) -> Response:
        """The service's topics (archived ones with ?archived=true), keyset pages by id."""
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        topics = owned(Topic.objects.filter(archived_at__isnull=not params["archived"]), request.user)
        if params.get("after") is not None:
            topics = topics.filter(pk__gt=params["after"])
        page = list(topics.order_by("id")[:PAGE_SIZE])
        next_after = page[-1].pk if len(page) == PAGE_SIZE else None
        return Response({"results": TopicSerializer(page, many=True).data, "next_after": next_after})

    @extend_schema(request=TopicInputSerializer, responses={201: TopicSerializer},
                   examples=[OpenApiExample("A monthly newsletter topic", value=TOPIC_EXAMPLE,
                                            request_only=True)])
    @idempotent
    def post(self, request: Request) -> Response:
        """Create a topic: what a broadcast mail is about, which a recipient may leave or join."""
        serializer = TopicInputSerializer(data=request.data, context={"service_id": request.user.pk})
        serializer.is_valid(raise_exception=True)
        try:
            topic = topic_create(service_id=request.user.pk, **serializer.validated_data)
        except TopicNameTakenError as exc:  # a concurrent create took the name
            raise _name_taken(exc) from exc
        return Response(TopicSerializer(topic).data, status=status.HTTP_201_CREATED)


class TopicDetailApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    @extend_schema(responses={200: TopicSerializer})
    def get(self, request: Request, topic_id: int) -> Response:
        """One topic (an archived one too: `archived_at` is set)."""
        return Response(TopicSerializer(_own_topic(request, topic_id)).data)

    @extend_schema(
        request=TopicPatchSerializer, responses={200: TopicSerializer, 409: error_response(
            409, "The topic is archived.", "Topic 3 is archived: it cannot be changed.")},
        description="A new `default_subscribed` applies at once to every recipient who made no "
                    "choice of their own (it records no history: nobody chose).",
        examples=[OpenApiExample("Make it opt-in", value={"default_subscribed": False}, request_only=True)])
    def patch(self, request: Request, topic_id: int) -> Response:
        """Change a topic's name, description or default."""
        topic = _own_topic(request, topic_id)
        serializer = TopicPatchSerializer(data=request.data,
                                          context={"service_id": topic.client_id, "topic_id": topic.pk})
        serializer.is_valid(raise_exception=True)
        if topic.archived_at is not None:
            raise Conflict(f"Topic {topic.pk} is archived: it cannot be changed.")
        try:
            topic = topic_update(topic=topic, changes=dict(serializer.validated_data))
        except TopicNameTakenError as exc:
            raise _name_taken(exc) from exc
        return Response(TopicSerializer(topic).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, topic_id: int) -> Response:
        """Archive a topic: no new send or choice may name it; what named it keeps it (404 once archived)."""
        topic = _own_topic(request, topic_id)
        if not topic_archive(topic_id=topic.pk):
            raise exceptions.NotFound(f"No topic {topic_id} (archived already).")
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- preferences ------------------------------------------------------------------------------


class TopicStateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    subscribed = serializers.BooleanField(help_text="Whether the topic's broadcast mail may reach them.")
    default_subscribed = serializers.BooleanField()
    chosen = serializers.BooleanField(help_text="true: their own choice; false: the topic's default.")


class ConsentChangeSerializer(serializers.Serializer):
    topic_id = serializers.IntegerField(allow_null=True, help_text="null: the whole broadcast stream.")
    topic = serializers.CharField(allow_null=True, help_text="The topic's name (null: the broadcast stream).")
    subscribed = serializers.BooleanField(help_text="The state after the change.")
    source = serializers.ChoiceField(choices=ConsentChange.Source.values)
    occurred_at = serializers.DateTimeField()
    campaign_id = serializers.IntegerField(allow_null=True, help_text="The mail whose link was used.")


class PreferencesSerializer(serializers.Serializer):
    contact_id = serializers.IntegerField()
    email = serializers.EmailField()
    broadcast = serializers.BooleanField(help_text="Subscribed to the service's broadcast stream (false: "
                                                   "no campaign or broadcast send reaches them).")
    suppressed = serializers.CharField(
        allow_null=True, help_text="The reason of the address's all-streams suppression (hard_bounce, "
                                   "complaint, ...): no mail reaches it, whatever they choose. null: none.")
    topics = TopicStateSerializer(many=True, help_text="Each unarchived topic of the service, by name.")
    history = ConsentChangeSerializer(many=True, help_text="The latest 100 changes, newest first.")


class PreferencesInputSerializer(StrictInputMixin, serializers.Serializer):
    broadcast = serializers.BooleanField(required=False, help_text="Join (true) or leave (false) the "
                                                                   "service's broadcast stream.")
    topics = serializers.DictField(child=serializers.BooleanField(), required=False,
                                   help_text=f'{{"<topic id or name>": true or false, ...}}: at most '
                                             f'{MAX_TOPIC_CHOICES}.')

    def validate_topics(self, value: dict) -> dict:
        if len(value) > MAX_TOPIC_CHOICES:
            raise serializers.ValidationError(f"At most {MAX_TOPIC_CHOICES} topics in one request.")
        return value


def _contact(request: Request, reference: str) -> Contact:
    """The contact the path names by id or by email address: the caller's own (any, with admin)."""
    text = reference.strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:
        lookup = {"pk": int(text)}
    elif "@" in text:
        lookup = {"email": text.lower()}
    else:
        raise exceptions.NotFound("No such contact.")
    return owned_or_404(Contact.objects.all(), request.user, message="No such contact.", **lookup)


def preferences_body(contact: Contact) -> dict:
    subject = ConsentSubject.of(contact.client_id, contact.email)
    broadcast_left = not contact.subscribed or broadcast_suppressed(service_id=subject.service_id,
                                                                   email=subject.email)
    return {
        "contact_id": contact.pk, "email": contact.email, "broadcast": not broadcast_left,
        "suppressed": everywhere_suppression_reason(subject),
        "topics": [{"id": state.topic.pk, "name": state.topic.name, "subscribed": state.subscribed,
                    "default_subscribed": state.topic.default_subscribed, "chosen": state.chosen}
                   for state in topic_states(service_id=subject.service_id, email=subject.email)],
        "history": [{"topic_id": change.topic_id, "topic": change.topic.name if change.topic else None,
                     "subscribed": change.subscribed, "source": change.source,
                     "occurred_at": change.occurred_at, "campaign_id": change.campaign_id}
                    for change in consent_history(service_id=subject.service_id, email=subject.email)],
    }


CONTACT_PARAMETER = OpenApiParameter(
    "contact", str, OpenApiParameter.PATH,
    description="The contact's id, or its email address (the service's own contact).")
PREFERENCES_EXAMPLE = {"broadcast": True, "topics": {"product-news": False}}


class PreferencesApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    @extend_schema(parameters=[CONTACT_PARAMETER], responses={200: PreferencesSerializer})
    def get(self, request: Request, contact: str) -> Response:
        """A contact's consent: the broadcast stream, each topic, an all-streams suppression, the history."""
        return Response(preferences_body(_contact(request, contact)))

    @extend_schema(
        parameters=[CONTACT_PARAMETER], request=PreferencesInputSerializer,
        responses={200: PreferencesSerializer, 409: error_response(
            409, "A re-subscription of an address suppressed for every stream (a hard bounce, a complaint, "
                 "a legal request): nothing was changed.",
            "the address is suppressed for every stream (hard_bounce); no subscription can bring its "
            "mail back")},
        description="All or nothing: every topic is checked first (an unknown, archived or other "
                    "service's topic is a 400 naming `topics.<key>`), then every change is applied "
                    "and recorded in the history with source `api` (a repeat of the current state "
                    "records nothing). Answers the new state.",
        examples=[OpenApiExample("Stay subscribed, but no product news", value=PREFERENCES_EXAMPLE,
                                 request_only=True)],
    )
    def put(self, request: Request, contact: str) -> Response:
        """Change a contact's consent: the broadcast stream and any of its topics."""
        found = _contact(request, contact)
        serializer = PreferencesInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        choices = data.get("topics", {})
        topics = topics_by_reference(service_id=found.client_id, references=choices)
        unknown = {f"topics.{key}": [topic_unknown_message(key)]
                   for key, topic in topics.items() if topic is None}
        if unknown:
            raise serializers.ValidationError(unknown)
        try:
            preferences_set(subject=ConsentSubject.of(found.client_id, found.email),
                            source=ConsentChange.Source.API, broadcast=data.get("broadcast"),
                            topics={topics[key]: subscribed for key, subscribed in choices.items()})
        except ConsentRefusedError as exc:
            raise Conflict(str(exc)) from exc
        found.refresh_from_db()
        return Response(preferences_body(found))
