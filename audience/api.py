"""Contacts, lists, segments and suppressions: POST /contacts/bulk, /lists, /segments, /suppressions."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audience.models import ContactList, Segment, Suppression
from audience.query import contacts_exist, segment_sql
from audience.segments import SegmentError, segment_compile
from audience.services.consent import ConsentRefusedError
from audience.services.contacts import (
    MAX_BULK,
    broadcast_suppression_create,
    contact_list_get_or_create,
    contacts_bulk_upsert,
    suppression_create,
    suppression_delete,
)
from clients.tenancy import client_is_admin, owned, owned_or_404
from core.api.errors import Conflict
from core.api.schema import error_response

PAGE_SIZE = 100


class ContactRowSerializer(serializers.Serializer):
    """One row of a bulk upload, for the schema: rows are checked by
    audience.validation.contact_row_clean (a plain function: 10,000 rows in well under a
    second), which names a bad row's fields in the answer's `errors`."""

    email = serializers.EmailField(max_length=254)
    name = serializers.CharField(max_length=200, required=False)
    locale = serializers.CharField(max_length=16, required=False, help_text="e.g. fr-CA")
    timezone = serializers.CharField(max_length=64, required=False, help_text="IANA, e.g. Europe/Berlin")
    subscribed = serializers.BooleanField(required=False)
    attributes = serializers.DictField(required=False, help_text="Merge data and segment attributes.")
    topics = serializers.DictField(
        child=serializers.BooleanField(), required=False,
        help_text='Topic choices, {"<topic id or name>": true or false}: applied with source import, '
                  "recorded in the history only when they change something. An unknown or archived "
                  "topic, or joining one for an address suppressed for every stream, refuses the row.")


@extend_schema_field(ContactRowSerializer(many=True))
class ContactRowsField(serializers.ListField):
    """The rows stay raw JSON here (each is checked by contact_row_clean, keeping the good ones)."""


class RowErrorSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    email = serializers.JSONField(help_text="The row's email as sent (null if none).")
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


class ContactBulkApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class InputSerializer(serializers.Serializer):
        contacts = ContactRowsField(child=serializers.JSONField(), allow_empty=False,
                                    help_text=f"At most {MAX_BULK:,} rows; an existing email is updated.")
        list = serializers.CharField(max_length=200, required=False,
                                     help_text="A list to add them to (created if new).")

    class OutputSerializer(serializers.Serializer):
        created = serializers.IntegerField()
        updated = serializers.IntegerField()
        errors = RowErrorSerializer(many=True, help_text="Rows refused (the others are kept).")
        list_id = serializers.IntegerField(allow_null=True)

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer, 413: error_response(
            413, f"More than {MAX_BULK:,} contacts in one call.",
            f"10001 contacts: at most {MAX_BULK} per call; split the upload or use "
            "`manage.py import_contacts`.")},
        examples=[OpenApiExample("Two contacts into a list", request_only=True, value={
            "list": "newsletter", "contacts": [
                {"email": "ada@example.com", "name": "Ada", "timezone": "Europe/London",
                 "attributes": {"plan": "pro", "code": "123456"}},
                {"email": "grace@example.com", "name": "Grace", "locale": "fr",
                 "attributes": {"plan": "free", "code": "654321"}}]})],
    )
    def post(self, request: Request) -> Response:
        """Upsert up to 10,000 contacts; per-row errors, valid rows kept."""
        rows = request.data.get("contacts") if isinstance(request.data, dict) else None
        if isinstance(rows, list) and len(rows) > MAX_BULK:
            raise TooLarge(f"{len(rows)} contacts: at most {MAX_BULK} per call; split the upload "
                           "or use `manage.py import_contacts`.")
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        owner = request.user.pk
        named = data.get("list")
        list_id = contact_list_get_or_create(client_id=owner, name=named).pk if named else None
        result = contacts_bulk_upsert(client_id=owner, rows=data["contacts"], list_id=list_id)
        body = {"created": result.created, "updated": result.updated, "errors": result.errors,
                "list_id": list_id}
        return Response(body, status=status.HTTP_200_OK)


class TooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class ListOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ListApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)

    class ListPageSerializer(serializers.Serializer):
        results = ListOutputSerializer(many=True, help_text=f"The first {PAGE_SIZE}, oldest first.")

    @extend_schema(request=InputSerializer, responses={201: ListOutputSerializer},
                   description="A list of this name that exists already is answered as created.",
                   examples=[OpenApiExample("A list", value={"name": "newsletter"}, request_only=True)])
    def post(self, request: Request) -> Response:
        """Create a contact list (optionally with its members)."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        contact_list = contact_list_get_or_create(client_id=request.user.pk,
                                                  name=serializer.validated_data["name"])
        return Response({"id": contact_list.pk, "name": contact_list.name}, status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="lists_list", responses={200: ListPageSerializer})
    def get(self, request: Request) -> Response:
        """Contact lists."""
        lists = owned(ContactList.objects.all(), request.user).order_by("id").values("id", "name")[:PAGE_SIZE]
        return Response({"results": list(lists)})


class SegmentOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    definition = serializers.JSONField()


class SegmentApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        definition = serializers.JSONField(
            help_text='{"match": "all"|"any", "conditions": [...]}: each condition '
                      '{"attribute": <key>, "op": equals|in|gt|gte|lt|lte|exists, "value"}, '
                      '{"field": email|name|timezone|locale, "op": equals|in, "value"}, '
                      '{"field": "subscribed", "op": "equals", "value": true}, '
                      '{"field": "created_at", "op": "within_days", "value": 30}, or a nested group '
                      "(3 levels, 100 conditions)."
        )

        def validate_name(self, value: str) -> str:
            if Segment.objects.filter(client=self.context["client"], name=value).exists():
                raise serializers.ValidationError("A segment with this name exists.")
            return value

        def validate(self, attrs: dict) -> dict:
            # Here, not in validate_definition: the error's path already starts at `definition`
            # (`definition.conditions[0].op`), so it is raised at the top of the body.
            try:
                segment_compile(attrs["definition"])
            except SegmentError as exc:
                raise serializers.ValidationError({exc.path: [exc.message]}) from exc
            return attrs

    class CreatedSerializer(SegmentOutputSerializer):
        empty = serializers.BooleanField(help_text="No contact matches it now.")

    class SegmentPageSerializer(serializers.Serializer):
        results = SegmentOutputSerializer(many=True, help_text=f"The first {PAGE_SIZE}, oldest first.")

    @extend_schema(request=InputSerializer, responses={201: CreatedSerializer}, examples=[
        OpenApiExample("Pro plan contacts", request_only=True, value={"name": "pro", "definition": {
            "match": "all", "conditions": [{"attribute": "plan", "op": "equals", "value": "pro"}]}})])
    def post(self, request: Request) -> Response:
        """Create a segment from a filter definition (validated, compiled to SQL)."""
        serializer = self.InputSerializer(data=request.data, context={"client": request.user.service})
        serializer.is_valid(raise_exception=True)
        segment = Segment.objects.create(client=request.user.service, **serializer.validated_data)
        body = {"id": segment.pk, "name": segment.name, "definition": segment.definition,
                "empty": not contacts_exist(segment_sql(segment.definition, client_id=segment.client_id))}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="segments_list", responses={200: SegmentPageSerializer})
    def get(self, request: Request) -> Response:
        """Segments."""
        segments = owned(Segment.objects.all(), request.user).order_by("id")
        segments = segments.values("id", "name", "definition")[:PAGE_SIZE]
        return Response({"results": list(segments)})


class SuppressionOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Suppression
        fields = ["email", "scope", "reason", "source", "created_at"]
        extra_kwargs = {"scope": {"help_text": "all: every message to the address (a bounce, a complaint, a "
                                               "legal request); broadcast: the service's broadcast mail only "
                                               "(an unsubscribe)."}}


class ExistingSuppressionSerializer(serializers.Serializer):
    """An address suppressed already: this client's suppression, or only the address when
    another client's mail or request caused it."""

    email = serializers.EmailField()
    scope = serializers.ChoiceField(choices=Suppression.Scope.values)
    reason = serializers.CharField(allow_blank=True, help_text="Empty: not this client's.")
    source = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField(allow_null=True)


SUPPRESS_EXAMPLE = {"email": "grace@example.com", "reason": "complaint"}
UNSUBSCRIBE_EXAMPLE = {"email": "ada@example.com", "scope": "broadcast"}
SCOPE_HELP = ("all (default): stop every message to the address, transactional too (a legal request); "
              "broadcast: the address leaves this service's broadcast stream (an unsubscribe: "
              "campaigns and broadcast sends skip it, an OTP still reaches it).")


class ScopeQuerySerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=Suppression.Scope.values, required=False,
                                    help_text="Only this scope (default: both).")


class SuppressionApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class InputSerializer(serializers.Serializer):
        email = serializers.EmailField(max_length=254)
        scope = serializers.ChoiceField(choices=Suppression.Scope.values, default="all", help_text=SCOPE_HELP)
        reason = serializers.ChoiceField(
            choices=Suppression.Reason.values, required=False,
            help_text="Default: manual (scope all), unsubscribe (scope broadcast, the only reason it takes).")

        def validate(self, attrs: dict) -> dict:
            unsubscribe = Suppression.Reason.UNSUBSCRIBE
            broadcast = attrs["scope"] == Suppression.Scope.BROADCAST
            if broadcast and attrs.setdefault("reason", unsubscribe) != unsubscribe:
                raise serializers.ValidationError({"reason": [
                    "A broadcast-scope suppression is an unsubscribe; a hard_bounce, complaint or manual "
                    "suppression stops every stream (scope all)."]})
            attrs.setdefault("reason", Suppression.Reason.MANUAL)
            return attrs

    OutputSerializer = SuppressionOutputSerializer

    class QuerySerializer(ScopeQuerySerializer):
        email = serializers.CharField(required=False, max_length=254, help_text="Exactly this address.")
        after = serializers.CharField(required=False, max_length=254,
                                      help_text="The last email of the previous page (`next_after`).")

    class PageSerializer(serializers.Serializer):
        results = SuppressionOutputSerializer(many=True, help_text=f"{PAGE_SIZE} per page, by email.")
        next_after = serializers.CharField(allow_null=True, help_text="null on the last page.")

    @extend_schema(
        request=InputSerializer,
        responses={201: SuppressionOutputSerializer,
                   200: OpenApiResponse(ExistingSuppressionSerializer,
                                        description="Suppressed already (by another client: the address "
                                                    "only, the other fields empty).")},
        examples=[OpenApiExample("Suppress an address (201)", value=SUPPRESS_EXAMPLE, request_only=True),
                  OpenApiExample("The same again (200: suppressed already)", value=SUPPRESS_EXAMPLE,
                                 request_only=True),
                  OpenApiExample("Unsubscribe from broadcast mail only (201)", value=UNSUBSCRIBE_EXAMPLE,
                                 request_only=True)],
    )
    def post(self, request: Request) -> Response:
        """Suppress an address for every stream, or (scope broadcast) unsubscribe it from the
        service's broadcast mail; until removed."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data["scope"] == Suppression.Scope.BROADCAST:
            suppression, created = broadcast_suppression_create(email=data["email"],
                                                                service_id=request.user.pk)
        else:
            suppression, created = suppression_create(email=data["email"], reason=data["reason"],
                                                      client_id=request.user.pk)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        if suppression.client_id != request.user.pk and not client_is_admin(request.user):
            # Suppressed already, by another client's mail or request: say so, show nothing of it.
            return Response({"email": suppression.email, "scope": suppression.scope, "reason": "",
                             "source": "", "created_at": None}, status=code)
        return Response(self.OutputSerializer(suppression).data, status=code)

    @extend_schema(operation_id="suppressions_list", parameters=[QuerySerializer],
                   responses={200: PageSerializer})
    def get(self, request: Request) -> Response:
        """The suppressions this client caused (all, with the admin scope), keyset pages by
        email: ?after=<last email of the previous page>&email=<exact>&scope=all|broadcast."""
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        # The live scope: a test key's suppressions (issue 27) are its own data.
        queryset = owned(Suppression.objects.filter(sandbox=False).order_by("email", "scope", "id"),
                         request.user)
        if params.get("email"):
            queryset = queryset.filter(email=params["email"].strip().lower())
        if params.get("scope"):
            queryset = queryset.filter(scope=params["scope"])
        if params.get("after"):
            queryset = queryset.filter(email__gt=params["after"])
        page = list(queryset[:PAGE_SIZE])
        next_after = page[-1].email if len(page) == PAGE_SIZE else None
        if next_after is not None:
            # An address may have rows in both scopes (and, with admin, several services'): a
            # page ends with all of its last address's rows, so `after` never skips one.
            page += list(queryset.filter(email=next_after).exclude(pk__in=[row.pk for row in page]))
        return Response({"results": self.OutputSerializer(page, many=True).data, "next_after": next_after})


class SuppressionDetailApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    @extend_schema(parameters=[ScopeQuerySerializer], responses={204: None, 409: error_response(
        409, "A broadcast-scope row of an address suppressed for every stream by another service "
             "(or an ESP): removing it would re-subscribe an address no mail may reach; nothing removed.",
        "the address is suppressed for every stream (hard_bounce); no subscription can bring its mail back")})
    def delete(self, request: Request, email: str) -> Response:
        """Remove the suppressions of the address this client caused (any, with the admin scope);
        removing a broadcast-scope one re-subscribes the address to the service's broadcast mail."""
        query = ScopeQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            removed = suppression_delete(email=email, client=request.user.service,
                                         scope=query.validated_data.get("scope"))
        except ConsentRefusedError as exc:
            raise Conflict(str(exc)) from exc
        if not removed:
            raise exceptions.NotFound(f"{email} is not suppressed.")
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(parameters=[ScopeQuerySerializer], responses={200: SuppressionOutputSerializer})
    def get(self, request: Request, email: str) -> Response:
        """One suppression this client caused (any, with the admin scope): its all-streams one
        first, else its broadcast-scope one (?scope= picks)."""
        query = ScopeQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = Suppression.objects.filter(sandbox=False).order_by("scope", "id")
        if query.validated_data.get("scope"):
            rows = rows.filter(scope=query.validated_data["scope"])
        suppression = owned_or_404(rows, request.user, message=f"{email} is not suppressed.",
                                   email=email.strip().lower())
        return Response(SuppressionOutputSerializer(suppression).data)
