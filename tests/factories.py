"""Small factories for test rows (plain functions: the models are few and simple)."""

from __future__ import annotations

import itertools

from clients.models import Service
from clients.services import service_create
from delivery.models import EmailMessage
from templates.models import TemplateVersion
from templates.services import template_create

_sequence = itertools.count()
OWNER_NAME = "test-service"
_keys: dict[str, str] = {}  # client id -> plain key (ids are never reused, even after a rollback)


def owner() -> Service:
    """The test's default API client: the one the `api` fixture's key belongs to, so rows made
    by factories belong to the client the test's requests are made as (decision 50)."""
    client = Service.objects.filter(name=OWNER_NAME).order_by("created").first()
    if client is None:
        client, _keys[""] = service_create(name=OWNER_NAME)
        _keys[client.pk] = _keys.pop("")
    return client


def owner_key() -> str:
    """The plain key of `owner()`."""
    return _keys[owner().pk]


def template_version(**overrides) -> TemplateVersion:
    fields = {
        "client": owner(),
        "name": f"tpl-{next(_sequence)}",
        "subject": "Hello {{ name }}",
        "html_body": "<p>Hi {{ name }}</p>",
    }
    return template_create(**{**fields, **overrides})


def email_message(*, version: TemplateVersion | None = None, client: Service | None = None,
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
