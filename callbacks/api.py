"""A service's status callback endpoints (decision 113; docs/api.md "Status callbacks").

    GET    /api/v1/webhooks                       the service's endpoints (never a secret)
    POST   /api/v1/webhooks                       a new one {url, events}; the secret, once
    GET    /api/v1/webhooks/{id}                  one
    PATCH  /api/v1/webhooks/{id}                  url, events, enabled (true: catch up from the log)
    DELETE /api/v1/webhooks/{id}                  gone, with its delivery log
    POST   /api/v1/webhooks/{id}/rotate-secret    a new secret, once; the old one signs beside it
    GET    /api/v1/webhooks/{id}/deliveries       the delivery log, newest first, cursor pages
    POST   /api/v1/webhooks/{id}/replay           deliver again from a time or an event

Scope `send`: a service learns what became of what it sent. Another service's endpoint is a 404.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from callbacks.addresses import AddressRefusedError, registration_check
from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_replay,
    endpoint_update,
    replay_cursor,
    secret_rotate,
)
from clients.tenancy import owned, owned_or_404
from core.api.errors import Conflict
from core.api.fields import StrictInputMixin
from core.api.pagination import IdCursorPagination
from core.api.schema import error_response
from eventlog.types import ALL_EVENT_TYPES

MAX_ENDPOINTS = 20  # per service
EXAMPLE_URL = "https://hooks.example.com/notifier"
EXAMPLE = {"url": EXAMPLE_URL, "events": ["message.delivered", "message.bounced", "message.complained"]}


class EndpointSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField(), source="event_types")
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField(
        help_text="`failing`: every delivery failed for NOTIFIER_CALLBACKS_RETRY_HOURS; `by_service`; "
                  "empty while enabled.")
    disabled_at = serializers.DateTimeField(allow_null=True)
    failing_since = serializers.DateTimeField(allow_null=True, help_text="null: the last delivery succeeded.")
    failed_attempts = serializers.IntegerField(help_text="Failed deliveries in a row.")
    previous_secret_expires_at = serializers.DateTimeField(
        allow_null=True, help_text="Until then the secret before the last rotation signs too.")
    created_at = serializers.DateTimeField()


class EndpointCreatedSerializer(EndpointSerializer):
    secret = serializers.CharField(help_text="The signing secret (`whsec_...`), shown this once.")


class EndpointInputSerializer(StrictInputMixin, serializers.Serializer):
    url = serializers.URLField(max_length=2000, help_text="https:// (plain http and loopback/private "
                               "addresses only where NOTIFIER_CALLBACKS_ALLOW_LOOPBACK=true).")
    events = serializers.ListField(child=serializers.ChoiceField(choices=ALL_EVENT_TYPES),
                                   allow_empty=False, max_length=len(ALL_EVENT_TYPES))
    enabled = serializers.BooleanField(required=False, help_text="PATCH only: false stops deliveries; "
                                       "true resumes them from where the endpoint stopped.")

    def validate_url(self, value: str) -> str:
        try:
            registration_check(value)
        except AddressRefusedError as refused:
            raise serializers.ValidationError(str(refused)) from refused
        return value

    def validate_events(self, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class EndpointPatchSerializer(EndpointInputSerializer):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, partial=True, **kwargs)


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = EndpointDelivery
        fields = ["id", "attempt", "event_ids", "status_code", "latency_ms", "error", "created_at"]


class ReplayInputSerializer(StrictInputMixin, serializers.Serializer):
    since = serializers.DateTimeField(required=False, help_text="Every event recorded at or after this time.")
    event_id = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1,
                                        help_text="This event and every one after it in the log.")

    def validate(self, attrs: dict) -> dict:
        if ("since" in attrs) == ("event_id" in attrs):
            raise serializers.ValidationError({"since": ["Give exactly one of since and event_id."]})
        return attrs


def _own_endpoint(request: Request, webhook_id: int) -> WebhookEndpoint:
    return owned_or_404(WebhookEndpoint.objects.all(), request.user, message=f"No webhook {webhook_id}.",
                        field="service", pk=webhook_id)


class WebhookListApi(APIView):
    required_scope = "send"

    @extend_schema(responses={200: EndpointSerializer(many=True)})
    def get(self, request: Request) -> Response:
        """The service's callback endpoints, oldest first (never a secret)."""
        endpoints = owned(WebhookEndpoint.objects.all(), request.user, field="service").order_by("id")
        return Response(EndpointSerializer(endpoints[:MAX_ENDPOINTS * 10], many=True).data)

    @extend_schema(
        request=EndpointInputSerializer, responses={201: EndpointCreatedSerializer},
        description="It receives the events of its types that happen from now on, in batches, signed as "
                    "Standard Webhooks with the `secret` answered here once. A URL that is not https, or "
                    "whose host resolves to a loopback, private or link-local address, is a 400 naming "
                    f"`url`; at most {MAX_ENDPOINTS} endpoints per service.",
        examples=[OpenApiExample("Delivery receipts and bounces", value=EXAMPLE, request_only=True)])
    def post(self, request: Request) -> Response:
        """Register a callback endpoint (the signing secret is answered once)."""
        serializer = EndpointInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "enabled" in data:
            raise serializers.ValidationError({"enabled": ["A new endpoint is enabled; PATCH changes it."]})
        if WebhookEndpoint.objects.filter(service_id=request.user.pk).count() >= MAX_ENDPOINTS:
            full = f"The service has {MAX_ENDPOINTS} endpoints already."
            raise serializers.ValidationError({"url": [full]})
        endpoint = endpoint_create(service_id=request.user.pk, url=data["url"], event_types=data["events"])
        body = EndpointCreatedSerializer(endpoint).data | {"secret": endpoint.secret}
        return Response(body, status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    required_scope = "send"

    @extend_schema(responses={200: EndpointSerializer})
    def get(self, request: Request, webhook_id: int) -> Response:
        """One callback endpoint: its state, whether it is failing or disabled."""
        return Response(EndpointSerializer(_own_endpoint(request, webhook_id)).data)

    @extend_schema(
        request=EndpointPatchSerializer, responses={200: EndpointSerializer},
        description="Only the fields given change. `enabled: true` on a disabled endpoint resumes it from "
                    "the last event it took: it catches up on everything of its types since then.",
        examples=[OpenApiExample("Enable it again", value={"enabled": True}, request_only=True)])
    def patch(self, request: Request, webhook_id: int) -> Response:
        """Change an endpoint's url, events, or enable or disable it."""
        endpoint = _own_endpoint(request, webhook_id)
        serializer = EndpointPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        endpoint = endpoint_update(endpoint=endpoint, changes=dict(serializer.validated_data))
        return Response(EndpointSerializer(endpoint).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, webhook_id: int) -> Response:
        """Delete an endpoint and its delivery log (nothing more is posted to it)."""
        endpoint_delete(endpoint=_own_endpoint(request, webhook_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecretApi(APIView):
    required_scope = "send"

    @extend_schema(
        request=None, responses={200: EndpointCreatedSerializer},
        description="The new secret signs every request from now on; the one it replaces signs beside it "
                    "(a second `v1,` signature in `webhook-signature`) for NOTIFIER_CALLBACKS_SECRET_OVERLAP_"
                    "HOURS (24 h), so the receiver can switch at its own pace.")
    def post(self, request: Request, webhook_id: int) -> Response:
        """Rotate the signing secret (the new one is answered once)."""
        endpoint = secret_rotate(endpoint=_own_endpoint(request, webhook_id))
        return Response(EndpointCreatedSerializer(endpoint).data | {"secret": endpoint.secret})


class WebhookDeliveryListApi(generics.GenericAPIView):
    required_scope = "send"
    pagination_class = IdCursorPagination
    serializer_class = DeliverySerializer

    @extend_schema(responses={200: DeliverySerializer(many=True)})
    def get(self, request: Request, webhook_id: int) -> Response:
        """The endpoint's delivery log, newest first: each POST's attempt, events, status, latency, error."""
        endpoint = _own_endpoint(request, webhook_id)
        page = self.paginate_queryset(EndpointDelivery.objects.filter(endpoint=endpoint))
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)


class WebhookReplayApi(APIView):
    required_scope = "send"

    @extend_schema(
        request=ReplayInputSerializer,
        responses={200: EndpointSerializer, 409: error_response(
            409, "The endpoint is disabled: enable it (PATCH) first.",
            "Webhook 3 is disabled: enable it first.")},
        description="Moves the endpoint back in the event log: every event of its types from that point on "
                    "is delivered again (the receiver deduplicates by event `id`).",
        examples=[OpenApiExample("Everything since a time", value={"since": "2026-01-01T00:00:00Z"},
                                 request_only=True)])
    def post(self, request: Request, webhook_id: int) -> Response:
        """Deliver again from a time or an event."""
        endpoint = _own_endpoint(request, webhook_id)
        serializer = ReplayInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if not endpoint.enabled:
            raise Conflict(f"Webhook {endpoint.pk} is disabled: enable it first.")
        data = serializer.validated_data
        cursor = replay_cursor(service_id=endpoint.service_id, since=data.get("since"),
                               event_id=data.get("event_id"))
        return Response(EndpointSerializer(endpoint_replay(endpoint=endpoint, cursor=cursor)).data)
