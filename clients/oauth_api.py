"""A service manages its own OAuth2 clients (decision 104), like its API keys (clients/api.py).

    GET    /api/v1/oauth-clients               the service's clients (never a secret)    keys
    POST   /api/v1/oauth-clients               a new client; the secret is answered once  keys
    DELETE /api/v1/oauth-clients/{client_id}   revoke: the client and its tokens go       keys

A client's tokens act as a live key of its service, so only a live credential makes one, with
no scope the credential does not hold itself. A foreign client id is a 404.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from clients.caller import Caller
from clients.key_types import KeyType
from clients.oauth_models import OAuthClient
from clients.oauth_services import oauth_client_create, oauth_client_revoke
from clients.scopes import Scope
from clients.services import KeyRefusedError
from core.api.fields import SafeLineField, StrictInputMixin


class OAuthClientOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = OAuthClient
        fields = ["client_id", "name", "scopes", "created", "created_by"]


class OAuthClientCreatedSerializer(OAuthClientOutputSerializer):
    client_secret = serializers.CharField(
        help_text="The secret, shown this once; only a hash is stored.")

    class Meta(OAuthClientOutputSerializer.Meta):
        fields = ["client_id", "client_secret", *OAuthClientOutputSerializer.Meta.fields[1:]]


class OAuthClientInputSerializer(StrictInputMixin, serializers.Serializer):
    name = SafeLineField(max_length=100)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.values),
                                   required=False, allow_empty=False,
                                   help_text="Default: the scopes of the credential making it.")


def _scopes_within_caller(caller: Caller, wanted: list[str] | None) -> list[str]:
    if caller.key_type != KeyType.LIVE:
        raise PermissionDenied(f"A {caller.key_type} key may not make OAuth clients: their "
                               "tokens act as live keys.")
    return caller.scopes_within(wanted)


def _client_of(caller: Caller, client_id: str) -> OAuthClient:
    client = OAuthClient.objects.filter(service=caller.service, client_id=client_id).first()
    if client is None:
        raise NotFound("No such OAuth client.")
    return client


class OAuthClientListCreateApi(generics.GenericAPIView):
    required_scope = "keys"
    serializer_class = OAuthClientOutputSerializer

    @extend_schema(summary="The service's OAuth2 clients (never a secret)",
                   responses={200: OAuthClientOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        clients = OAuthClient.objects.filter(service=request.user.service).order_by("-created")
        return Response(OAuthClientOutputSerializer(clients, many=True).data)

    @extend_schema(
        summary="Create an OAuth2 client (the secret is answered once)",
        description="Its scopes are at most those of the credential making it; only a live "
                    "credential makes one. Exchange `client_id` and `client_secret` for a bearer "
                    "token at `POST /oauth/token` (grant_type=client_credentials).",
        request=OAuthClientInputSerializer, responses={201: OAuthClientCreatedSerializer},
        examples=[OpenApiExample("A reporting job", request_only=True,
                                 value={"name": "reports", "scopes": ["analytics"]})],
    )
    def post(self, request: Request) -> Response:
        serializer = OAuthClientInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        scopes = _scopes_within_caller(request.user, data.get("scopes"))
        try:
            client, secret = oauth_client_create(service=request.user.service, name=data["name"],
                                                 scopes=scopes,
                                                 created_by=request.user.maker)
        except KeyRefusedError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        client.client_secret = secret
        return Response(OAuthClientCreatedSerializer(client).data, status=status.HTTP_201_CREATED)


class OAuthClientDetailApi(generics.GenericAPIView):
    required_scope = "keys"
    serializer_class = OAuthClientOutputSerializer

    @extend_schema(summary="Revoke an OAuth2 client and its tokens (cannot be undone)",
                   description="Its tokens are refused by every web process within "
                               "NOTIFIER_API_KEY_CACHE_SECONDS (5 s by default).",
                   responses={204: None})
    def delete(self, request: Request, client_id: str) -> Response:
        oauth_client_revoke(client=_client_of(request.user, client_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
