"""Small factories for test rows (plain functions: the models are few and simple)."""

from __future__ import annotations

import itertools

from clients.models import ApiClient
from delivery.models import EmailMessage
from templates.models import TemplateVersion
from templates.services import template_create

_sequence = itertools.count()


def template_version(**overrides) -> TemplateVersion:
    fields = {
        "name": f"tpl-{next(_sequence)}",
        "subject": "Hello {{ name }}",
        "html_body": "<p>Hi {{ name }}</p>",
    }
    return template_create(**{**fields, **overrides})


def email_message(*, version: TemplateVersion | None = None, client: ApiClient | None = None,
                  **overrides) -> EmailMessage:
    n = next(_sequence)
    fields = {
        "recipient": f"user{n}@example.com",
        "context": {"name": f"User {n}"},
        "template_version": version or template_version(),
        "priority": 0,
        "idempotency_key": f"test:{n}",
        "client": client,
    }
    return EmailMessage.objects.create(**{**fields, **overrides})
