"""Templates API: CRUD with immutable versions, locale variants, and a render preview.

    GET    /api/v1/templates                 list (cursor pagination)
    POST   /api/v1/templates                 create (version 1)          Idempotency-Key
    GET    /api/v1/templates/{id}            the current version
    PUT    /api/v1/templates/{id}            add a version (never edits one)
    DELETE /api/v1/templates/{id}            deactivate (sent mail keeps its version)
    POST   /api/v1/templates/{id}/render     preview with a context (and locale)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from clients.idempotency import idempotent
from core.api.fields import ContextField, SafeLineField, StrictInputMixin
from core.api.pagination import IdCursorPagination
from templates.models import Template, TemplateVersion
from templates.rendering import TemplateError, missing_variables, render_version, variant_for_locale
from templates.selectors import template_get_active, template_list_active, template_version_get
from templates.services import template_create, template_deactivate, template_update

LOCALE = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8}){0,2}$")
MAX_BODY = 512 * 1024
# Swagger's examples work on `make run` as it starts: its demo client already has `welcome`.
EXAMPLE = {"name": "password-reset", "subject": "Reset your password, {{ name }}",
           "html_body": "<h1>Hello {{ name }}</h1><p>Your code is <b>{{ code }}</b>.</p>",
           "variants": {"fr": {"subject": "Nouveau mot de passe, {{ name }}",
                               "html_body": "<h1>Bonjour {{ name }}</h1><p>Code : {{ code }}</p>"}}}
NEW_VERSION = {"subject": "Your reset code, {{ name }}",
               "html_body": "<p>Hello {{ name }}, your code is <b>{{ code }}</b>.</p>",
               "text_body": "Hello {{ name }}, your code is {{ code }}."}


class ContentSerializer(StrictInputMixin, serializers.Serializer):
    subject = SafeLineField(max_length=998)
    html_body = serializers.CharField(max_length=MAX_BODY, trim_whitespace=False)
    text_body = serializers.CharField(max_length=MAX_BODY, required=False, default="",
                                      allow_blank=True, trim_whitespace=False)


class VersionInputSerializer(ContentSerializer):
    variants = serializers.DictField(
        child=ContentSerializer(), required=False, default=dict,
        help_text="Per-locale content, e.g. {\"fr\": {...}}; chosen by the contact's locale.",
    )

    def validate_variants(self, value: dict) -> dict:
        bad = sorted(locale for locale in value if not LOCALE.match(locale))
        if bad:
            raise serializers.ValidationError(f"Not locale codes (e.g. fr, pt-BR): {', '.join(bad)}.")
        if len(value) > 50:
            raise serializers.ValidationError("At most 50 locale variants.")
        return value


class CreateInputSerializer(VersionInputSerializer):
    name = serializers.SlugField(max_length=100)

    def validate_name(self, value: str) -> str:
        if Template.objects.filter(client=self.context["client"], name=value).exists():
            raise serializers.ValidationError("A template with this name exists.")
        return value


class TemplateOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="template_id")
    name = serializers.CharField(source="template.name")
    version = serializers.IntegerField()
    subject = serializers.CharField()
    html_body = serializers.CharField()
    text_body = serializers.CharField()
    variables = serializers.ListField(child=serializers.CharField(), source="required_variables",
                                      help_text="Variables a send's context must provide.")
    locales = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_locales(self, version: TemplateVersion) -> list[str]:
        return [row.locale for row in version.siblings() if row.locale]


class TemplateListItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = Template
        fields = ["id", "name", "created_at"]


def _save(write: Callable[..., TemplateVersion], **kwargs: Any) -> TemplateVersion:
    try:
        return write(**kwargs)
    except TemplateError as exc:
        raise serializers.ValidationError({"template": [str(exc)]}) from exc
    except IntegrityError as exc:  # a concurrent create took the name
        raise serializers.ValidationError({"name": ["A template with this name exists."]}) from exc


class TemplateListCreateApi(generics.GenericAPIView):
    required_scope = ("send", "campaigns")
    throttle_scope = "templates"
    pagination_class = IdCursorPagination
    serializer_class = TemplateListItemSerializer

    def get_queryset(self):
        return template_list_active(client=self.request.user.service)

    @extend_schema(summary="List active templates", responses={200: TemplateListItemSerializer(many=True)})
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(TemplateListItemSerializer(page, many=True).data)

    @extend_schema(
        summary="Create a template (version 1)",
        description="Jinja2 in subject/html_body/text_body, checked on save: a syntax error is a "
                    "400 naming the part and line; `variables` lists what a send must provide.",
        request=CreateInputSerializer, responses={201: TemplateOutputSerializer},
        examples=[OpenApiExample("Welcome with a French variant", value=EXAMPLE, request_only=True)],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        serializer = CreateInputSerializer(data=request.data, context={"client": request.user.service})
        serializer.is_valid(raise_exception=True)
        version = _save(template_create, client=request.user.service, **serializer.validated_data)
        return Response(TemplateOutputSerializer(version).data, status=status.HTTP_201_CREATED)


class TemplateDetailApi(generics.GenericAPIView):
    required_scope = ("send", "campaigns")
    throttle_scope = "templates"
    serializer_class = TemplateOutputSerializer

    class VersionQuerySerializer(StrictInputMixin, serializers.Serializer):
        version = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1,
                                           help_text="An older version (default: the current one).")

    @extend_schema(summary="A template's current (or a given) version",
                   parameters=[VersionQuerySerializer], responses={200: TemplateOutputSerializer})
    def get(self, request: Request, template_id: int) -> Response:
        query = self.VersionQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        template = template_get_active(client=request.user.service, template_id=template_id)
        version = template_version_get(template=template, number=query.validated_data.get("version"))
        return Response(TemplateOutputSerializer(version).data)

    @extend_schema(summary="Add a version (versions are immutable)", request=VersionInputSerializer,
                   responses={200: TemplateOutputSerializer},
                   examples=[OpenApiExample("New content", value=NEW_VERSION, request_only=True)])
    def put(self, request: Request, template_id: int) -> Response:
        template = template_get_active(client=request.user.service, template_id=template_id)
        serializer = VersionInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version = _save(template_update, template=template, **serializer.validated_data)
        return Response(TemplateOutputSerializer(version).data)

    @extend_schema(summary="Deactivate a template", responses={204: None})
    def delete(self, request: Request, template_id: int) -> Response:
        template = template_get_active(client=request.user.service, template_id=template_id)
        template_deactivate(template=template)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TemplateRenderApi(generics.GenericAPIView):
    required_scope = ("send", "campaigns")
    throttle_scope = "templates"

    class InputSerializer(StrictInputMixin, serializers.Serializer):
        context = ContextField()
        locale = serializers.RegexField(LOCALE, required=False, allow_blank=True, default="",
                                        max_length=16)
        version = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)

    class OutputSerializer(serializers.Serializer):
        version = serializers.IntegerField()
        locale = serializers.CharField()
        subject = serializers.CharField()
        html = serializers.CharField()
        text = serializers.CharField()

    serializer_class = InputSerializer

    @extend_schema(
        summary="Render a preview",
        description="Renders subject, HTML (CSS inlined, merge values escaped) and text with the "
                    "given context, in the sandbox with its time and size limits. Missing "
                    "variables are listed in a 400.",
        request=InputSerializer, responses={200: OutputSerializer},
        examples=[OpenApiExample("Preview", request_only=True,
                                 value={"context": {"name": "Ada", "code": "123456"}, "locale": "fr"})],
    )
    def post(self, request: Request, template_id: int) -> Response:
        template = template_get_active(client=request.user.service, template_id=template_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        version = template_version_get(template=template, number=data.get("version"))
        missing = missing_variables(version, data["context"])
        if missing:
            raise serializers.ValidationError({"context": [f"Missing variables: {', '.join(missing)}."]})
        try:
            variant = variant_for_locale(version, data["locale"])
            rendered = render_version(variant, data["context"])
        except TemplateError as exc:
            raise serializers.ValidationError({"template": [str(exc)]}) from exc
        body = {"version": version.version, "locale": variant.locale, "subject": rendered.subject,
                "html": rendered.html, "text": rendered.text}
        return Response(self.OutputSerializer(body).data)
