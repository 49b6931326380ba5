"""GET /api/v1/templates/{id}/preview?contact=<email or id>: the parts a contact would receive.

Lives in campaigns/ because the merge data comes from the contact (the same context the send
path reads for a campaign message: attributes plus email, name, timezone, locale; SQL twin:
audience.selectors.contact_merge_data_sql).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audience.models import Contact
from clients.tenancy import owned_or_404
from consent.links import PREFERENCES_VARIABLE
from consent.tokens import preferences_url
from templates.rendering import TemplateError, compile_version, render
from templates.selectors import template_get_active, template_version_get


def contact_context(contact: Contact) -> dict:
    return {**contact.attributes, "email": contact.email, "name": contact.name,
            "timezone": contact.timezone, "locale": contact.locale}


class TemplatePreviewApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class QuerySerializer(serializers.Serializer):
        contact = serializers.CharField(
            max_length=254, help_text="A contact's email or id.",
            error_messages=dict.fromkeys(("required", "blank"), "Give a contact email or id."),
        )

    class OutputSerializer(serializers.Serializer):
        template_id = serializers.IntegerField()
        version = serializers.IntegerField()
        contact = serializers.EmailField()
        subject = serializers.CharField()
        text = serializers.CharField()
        html = serializers.CharField()

    @extend_schema(parameters=[QuerySerializer], responses={200: OutputSerializer}, examples=[
        OpenApiExample("Ada", value="ada@example.com", parameter_only=("contact", "query"),
                       description="A contact of POST /api/v1/contacts/bulk's example.")])
    def get(self, request: Request, template_id: int) -> Response:
        """Render a template for one contact (subject, text, HTML)."""
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        template = template_get_active(client=request.user.service, template_id=template_id)
        version = template_version_get(template=template)
        reference = query.validated_data["contact"].strip()
        lookup = {"pk": int(reference)} if reference.isdigit() else {"email": reference.lower()}
        # The template's owner's contact: an admin previews a client's template for its contacts.
        contact = owned_or_404(Contact.objects.filter(client_id=template.client_id), request.user,
                               message=f"No contact {reference!r}.", **lookup)
        compiled = compile_version(version.id, version.subject, version.html_body, version.text_body)
        try:
            # The contact's own preference link, as its broadcast mail would carry it.
            link = preferences_url(service_id=contact.client_id, email=contact.email.lower())
            rendered = render(compiled, {PREFERENCES_VARIABLE: link, **contact_context(contact)})
        except TemplateError as exc:
            raise serializers.ValidationError({"contact": [f"Template does not render: {exc}"]}) from exc
        return Response({"template_id": version.template_id, "version": version.version,
                         "contact": contact.email, "subject": rendered.subject,
                         "text": rendered.text, "html": rendered.html})
