"""Contacts, lists, segments and suppressions: POST /contacts/bulk, /lists, /segments, /suppressions."""

from __future__ import annotations

from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audience.models import ContactList, Segment, Suppression
from audience.query import contacts_exist, segment_sql
from audience.segments import SegmentError, segment_compile
from audience.services.contacts import (
    MAX_BULK,
    contact_list_get_or_create,
    contacts_bulk_upsert,
    suppression_create,
    suppression_delete,
)
from clients.tenancy import client_is_admin, owned, owned_or_404

PAGE_SIZE = 100


class ContactBulkApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    class InputSerializer(serializers.Serializer):
        contacts = serializers.ListField(child=serializers.JSONField(), allow_empty=False)
        list = serializers.CharField(max_length=200, required=False)

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


class ListApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)

    def post(self, request: Request) -> Response:
        """Create a contact list (optionally with its members)."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        contact_list = contact_list_get_or_create(client_id=request.user.pk,
                                                  name=serializer.validated_data["name"])
        return Response({"id": contact_list.pk, "name": contact_list.name}, status=status.HTTP_201_CREATED)

    def get(self, request: Request) -> Response:
        """Contact lists."""
        lists = owned(ContactList.objects.all(), request.user).order_by("id").values("id", "name")[:PAGE_SIZE]
        return Response({"results": list(lists)})


class SegmentApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        definition = serializers.JSONField()

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

    def post(self, request: Request) -> Response:
        """Create a segment from a filter definition (validated, compiled to SQL)."""
        serializer = self.InputSerializer(data=request.data, context={"client": request.user})
        serializer.is_valid(raise_exception=True)
        segment = Segment.objects.create(client=request.user, **serializer.validated_data)
        body = {"id": segment.pk, "name": segment.name, "definition": segment.definition,
                "empty": not contacts_exist(segment_sql(segment.definition, client_id=segment.client_id))}
        return Response(body, status=status.HTTP_201_CREATED)

    def get(self, request: Request) -> Response:
        """Segments."""
        segments = owned(Segment.objects.all(), request.user).order_by("id")
        segments = segments.values("id", "name", "definition")[:PAGE_SIZE]
        return Response({"results": list(segments)})


class SuppressionApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    class InputSerializer(serializers.Serializer):
        email = serializers.EmailField(max_length=254)
        reason = serializers.ChoiceField(choices=Suppression.Reason.values, default="manual")

    class OutputSerializer(serializers.ModelSerializer):
        class Meta:
            model = Suppression
            fields = ["email", "reason", "source", "created_at"]

    def post(self, request: Request) -> Response:
        """Suppress an address: it is never mailed again until removed."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        suppression, created = suppression_create(**serializer.validated_data, client_id=request.user.pk)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        if suppression.client_id != request.user.pk and not client_is_admin(request.user):
            # Suppressed already, by another client's mail or request: say so, show nothing of it.
            return Response({"email": suppression.email, "reason": "", "source": "", "created_at": None},
                            status=code)
        return Response(self.OutputSerializer(suppression).data, status=code)

    def get(self, request: Request) -> Response:
        """The suppressions this client caused (all, with the admin scope), keyset pages by
        email: ?after=<last email of the previous page>&email=<exact>."""
        queryset = owned(Suppression.objects.order_by("email"), request.user)
        if request.query_params.get("email"):
            queryset = queryset.filter(email=request.query_params["email"].strip().lower())
        if request.query_params.get("after"):
            queryset = queryset.filter(email__gt=request.query_params["after"])
        page = list(queryset[:PAGE_SIZE])
        next_after = page[-1].email if len(page) == PAGE_SIZE else None
        return Response({"results": self.OutputSerializer(page, many=True).data, "next_after": next_after})


class SuppressionDetailApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    def delete(self, request: Request, email: str) -> Response:
        """Remove a suppression this client caused (any, with the admin scope)."""
        if not suppression_delete(email=email, client=request.user):
            raise exceptions.NotFound(f"{email} is not suppressed.")
        return Response(status=status.HTTP_204_NO_CONTENT)

    def get(self, request: Request, email: str) -> Response:
        """One suppression this client caused (any, with the admin scope)."""
        suppression = owned_or_404(Suppression.objects.all(), request.user,
                                   message=f"{email} is not suppressed.", email=email.strip().lower())
        return Response(SuppressionApi.OutputSerializer(suppression).data)
