"""A service manages itself: its keys, its team list, and what it is (issue 27).

    GET    /api/v1/service                  the caller's service (any scope)
    PATCH  /api/v1/service                  its retention per stream                    keys
    GET    /api/v1/keys                     the service's keys (never a secret)        keys
    POST   /api/v1/keys                     a new key; the secret is answered once      keys
    GET    /api/v1/keys/{id}                one key (id = its public prefix)            keys
    DELETE /api/v1/keys/{id}                revoke (every web process within 5 s)       keys
    GET    /api/v1/team-members             the team list team keys may send to         keys
    POST   /api/v1/team-members             add an address                              keys
    DELETE /api/v1/team-members/{id}        remove one                                  keys

A key never manages another service's keys (a foreign id is a 404; a key holding `admin`
sees every service's, as everywhere), never makes a key with a
scope it does not hold itself, and never a key that sends for more than it does: a test key
makes test keys only, a team key team or test keys. POST /api/v1/keys takes no Idempotency-Key:
a replay would have to store the secret it answered.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from clients.caller import Caller
from clients.key_types import KeyType
from clients.models import ApiKey, Service, TeamMember
from clients.retention import MAX_DAYS, RetentionRefusedError, retention_of, retention_set
from clients.scopes import Scope, client_allows
from clients.services import KeyRefusedError, api_key_create, api_key_revoke
from clients.tenancy import owned, owned_or_404
from core.api.fields import SafeEmailField, SafeLineField, StrictInputMixin

# What a key of each type may make: never a key that reaches more than itself.
MAY_MAKE = {
    KeyType.LIVE: set(KeyType.values),
    KeyType.TEAM: {KeyType.TEAM, KeyType.TEST},
    KeyType.TEST: {KeyType.TEST},
}


class StreamRetentionSerializer(StrictInputMixin, serializers.Serializer):
    personal_data_days = serializers.IntegerField(
        min_value=1, max_value=MAX_DAYS, required=False,
        help_text="Days a message keeps its recipient's address, context and the ESP's payloads; "
                  "then they are removed and the row stays (statuses, counts, a keyed hash of the address).")
    metadata_days = serializers.IntegerField(
        min_value=1, max_value=MAX_DAYS, required=False,
        help_text="Days you read a message and its events at all (at least personal_data_days).")


class RetentionSerializer(StrictInputMixin, serializers.Serializer):
    transactional = StreamRetentionSerializer(required=False)
    broadcast = StreamRetentionSerializer(required=False)


class ServiceOutputSerializer(serializers.ModelSerializer):
    retention = serializers.SerializerMethodField()

    class Meta:
        model = Service
        fields = ["id", "name", "scopes", "rate_limit", "endpoint_rate_limits", "retention", "created"]

    @extend_schema_field(RetentionSerializer)
    def get_retention(self, service: Service) -> dict[str, dict[str, int]]:
        return {stream: kept.as_dict() for stream, kept in retention_of(service).items()}


class ServicePatchSerializer(StrictInputMixin, serializers.Serializer):
    retention = RetentionSerializer(help_text="Any part: the days not given stay as they are.")


class KeyOutputSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="prefix", help_text="The key's public prefix.")
    type = serializers.CharField(source="key_type")

    class Meta:
        model = ApiKey
        fields = ["id", "name", "type", "scopes", "rate_limit", "created", "created_by",
                  "last_used_at", "expiry_date", "revoked"]


class KeyCreatedSerializer(KeyOutputSerializer):
    key = serializers.CharField(help_text="The secret, shown this once; only a hash is stored.")

    class Meta(KeyOutputSerializer.Meta):
        fields = ["key", *KeyOutputSerializer.Meta.fields]


class KeyInputSerializer(StrictInputMixin, serializers.Serializer):
    name = SafeLineField(max_length=50)
    type = serializers.ChoiceField(choices=KeyType.values, default=KeyType.LIVE)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.values),
                                   required=False, allow_empty=False,
                                   help_text="Default: the scopes of the key making it.")
    expiry_date = serializers.DateTimeField(required=False, allow_null=True, default=None)
    rate_limit = serializers.CharField(required=False, default="", allow_blank=True, max_length=20,
                                       help_text="A lower limit for this key alone, e.g. 10/s.")


class TeamMemberSerializer(StrictInputMixin, serializers.ModelSerializer):
    email = SafeEmailField()

    class Meta:
        model = TeamMember
        fields = ["id", "email", "created"]
        read_only_fields = ["id", "created"]


def _key_of(caller: Caller, key_id: str) -> ApiKey:
    return owned_or_404(ApiKey.objects.all(), caller, field="service", message="No such key.",
                        prefix=key_id)


def _refuse_escalation(caller: Caller, data: dict[str, Any]) -> list[str]:
    """The new key's scopes, after checking it reaches no further than the key making it."""
    if data["type"] not in MAY_MAKE[caller.key_type]:
        raise serializers.ValidationError(
            {"type": [f"A {caller.key_type} key may make {', '.join(sorted(MAY_MAKE[caller.key_type]))} "
                      "keys only."]})
    return caller.scopes_within(data.get("scopes"))


class ServiceApi(generics.GenericAPIView):
    required_scope = tuple(Scope.values)  # any key may read what its service is
    serializer_class = ServiceOutputSerializer

    @extend_schema(summary="The caller's service", responses={200: ServiceOutputSerializer})
    def get(self, request: Request) -> Response:
        return Response(ServiceOutputSerializer(request.user.service).data)

    @extend_schema(
        summary="Change the service's retention per stream",
        description="Scope `keys`. `retention.<stream>.personal_data_days` (1-3650) and "
                    "`metadata_days` (personal_data_days-3650), any part; what is not given stays. "
                    "A personal retention shorter than the wait of a message of that stream you "
                    "have scheduled (one-off or campaign) is a 400 naming the field: a scheduled "
                    "message keeps its data until it is sent. A 400 changes nothing; a test key "
                    "is a 403.",
        request=ServicePatchSerializer, responses={200: ServiceOutputSerializer},
        examples=[OpenApiExample("Newsletters: a shorter personal retention", request_only=True,
                                 value={"retention": {"broadcast": {"personal_data_days": 3}}})],
    )
    def patch(self, request: Request) -> Response:
        # Reading what the service is takes any scope; changing it takes `keys`, the scope that
        # manages the service itself (its keys, OAuth clients and team list).
        if not client_allows(request.user, Scope.KEYS, request.method):
            self.permission_denied(request, message="This credential lacks the 'keys' scope.",
                                   code="missing_scope")
        if request.user.key_type == KeyType.TEST:
            # Retention applies to the live messages too: a test key reaches no further than
            # the sandbox, as with the keys it may make.
            self.permission_denied(request, message="A test key cannot change the service's retention.",
                                   code="test_key")
        serializer = ServicePatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            service = retention_set(service=request.user.service,
                                    change=serializer.validated_data["retention"])
        except RetentionRefusedError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        return Response(ServiceOutputSerializer(service).data)


class KeyListCreateApi(generics.GenericAPIView):
    required_scope = "keys"
    serializer_class = KeyOutputSerializer

    @extend_schema(summary="The service's API keys (never a secret)",
                   responses={200: KeyOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        keys = owned(ApiKey.objects.all(), request.user, field="service").order_by("-created")
        return Response(KeyOutputSerializer(keys, many=True).data)

    @extend_schema(
        summary="Create an API key (the secret is answered once)",
        description="A key's scopes are at most those of the key making it; a test key makes test "
                    "keys only, a team key team or test keys. Rotation: create a second key, move "
                    "traffic to it, then DELETE the first; both work in between.",
        request=KeyInputSerializer, responses={201: KeyCreatedSerializer},
        examples=[OpenApiExample("A test key for CI", request_only=True,
                                 value={"name": "ci", "type": "test", "scopes": ["send"]})],
    )
    def post(self, request: Request) -> Response:
        serializer = KeyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        scopes = _refuse_escalation(request.user, data)
        try:
            api_key, key = api_key_create(
                service=request.user.service, name=data["name"], key_type=data["type"],
                scopes=scopes, expiry_date=data["expiry_date"], rate_limit=data["rate_limit"],
                created_by=request.user.maker)
        except KeyRefusedError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        api_key.key = key
        return Response(KeyCreatedSerializer(api_key).data, status=status.HTTP_201_CREATED)


class KeyDetailApi(generics.GenericAPIView):
    required_scope = "keys"
    serializer_class = KeyOutputSerializer

    @extend_schema(summary="One API key", responses={200: KeyOutputSerializer})
    def get(self, request: Request, key_id: str) -> Response:
        return Response(KeyOutputSerializer(_key_of(request.user, key_id)).data)

    @extend_schema(summary="Revoke an API key (cannot be undone)",
                   description="Every web process refuses it within NOTIFIER_API_KEY_CACHE_SECONDS "
                               "(5 s by default); the service's other keys keep working.",
                   responses={204: None})
    def delete(self, request: Request, key_id: str) -> Response:
        api_key_revoke(api_key=_key_of(request.user, key_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamMemberListCreateApi(generics.GenericAPIView):
    required_scope = "keys"
    serializer_class = TeamMemberSerializer

    @extend_schema(summary="The team list (the addresses team keys may send to)",
                   responses={200: TeamMemberSerializer(many=True)})
    def get(self, request: Request) -> Response:
        members = owned(TeamMember.objects.all(), request.user, field="service").order_by("email")
        return Response(TeamMemberSerializer(members, many=True).data)

    @extend_schema(summary="Add an address to the team list", request=TeamMemberSerializer,
                   responses={201: TeamMemberSerializer},
                   examples=[OpenApiExample("A developer", request_only=True,
                                            value={"email": "dev@example.com"})])
    def post(self, request: Request) -> Response:
        serializer = TeamMemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                member = TeamMember.objects.create(service=request.user.service,
                                                   email=serializer.validated_data["email"].lower())
        except IntegrityError as exc:
            raise serializers.ValidationError({"email": ["Already on the team list."]}) from exc
        return Response(TeamMemberSerializer(member).data, status=status.HTTP_201_CREATED)


class TeamMemberDetailApi(generics.GenericAPIView):
    required_scope = "keys"
    serializer_class = TeamMemberSerializer

    @extend_schema(summary="Remove an address from the team list", responses={204: None})
    def delete(self, request: Request, member_id: int) -> Response:
        deleted, _ = owned(TeamMember.objects.all(), request.user, field="service").filter(
            pk=member_id).delete()
        if not deleted:
            raise NotFound("No such team member.")
        return Response(status=status.HTTP_204_NO_CONTENT)
