"""POST /api/v1/templates"""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clients.idempotency import idempotent
from notifier.api_fields import SafeLineField
from templates.models import Template
from templates.rendering import TemplateError
from templates.services import template_create


class TemplateCreateApi(APIView):
    required_scope = ("send", "campaigns")
    throttle_scope = "templates"

    class InputSerializer(serializers.Serializer):
        name = serializers.SlugField(max_length=100)
        subject = SafeLineField(max_length=998)
        html_body = serializers.CharField(max_length=512 * 1024)
        text_body = serializers.CharField(max_length=512 * 1024, required=False, default="")

        def validate_name(self, value: str) -> str:
            if Template.objects.filter(name=value).exists():
                raise serializers.ValidationError("A template with this name exists.")
            return value

    @idempotent
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            version = template_create(**serializer.validated_data)
        except TemplateError as exc:
            raise serializers.ValidationError({"template": [str(exc)]}) from exc
        body = {"id": version.template_id, "name": version.template.name, "version": version.version}
        return Response(body, status=status.HTTP_201_CREATED)
