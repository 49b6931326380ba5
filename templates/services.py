"""Writes and reads on templates. Versions are immutable: an edit adds version N+1.

The version a send names (template_version_for_send) is cached per process (decision 53) under
a generation counter in Redis: every change to a template or a version (these services, the
admin, any model save or delete) bumps it once it commits, and each lookup reads it (one GET),
so a publish is seen by every process's next request; the changing process drops its own cache
at once. Without Redis the lookup goes to the database.

    notifier:templates:generation      integer, INCR on every template change
"""

from __future__ import annotations

import logging
import time

import redis
from django.db import transaction
from rest_framework import serializers

from clients.models import Service
from core.redis_client import get_redis, redis_key
from templates.models import Template, TemplateVersion
from templates.rendering import TemplateError, required_variables

Variants = dict[str, dict[str, str]]
logger = logging.getLogger(__name__)


def _variables_of(locale: str, content: dict[str, str]) -> list[str]:
    try:
        return required_variables(subject=content["subject"], html_body=content["html_body"],
                                  text_body=content.get("text_body", ""))
    except TemplateError as exc:
        raise TemplateError(f"{locale}: {exc}" if locale else str(exc)) from exc


def _add_version(*, template: Template, number: int, subject: str, html_body: str,
                 text_body: str, variants: Variants | None) -> TemplateVersion:
    default_vars = _variables_of("", {"subject": subject, "html_body": html_body, "text_body": text_body})
    rows = []
    for locale, content in sorted((variants or {}).items()):
        variables = _variables_of(locale, content)
        extra = sorted(set(variables) - set(default_vars))
        if extra:
            # The API checks a send's context against the default's variables only.
            raise TemplateError(f"{locale}: uses variables the default does not: {', '.join(extra)}")
        rows.append(TemplateVersion(template=template, version=number, locale=locale,
                                    subject=content["subject"], html_body=content["html_body"],
                                    text_body=content.get("text_body", ""), required_variables=variables))
    default = TemplateVersion.objects.create(
        template=template, version=number, subject=subject, html_body=html_body,
        text_body=text_body, required_variables=default_vars,
    )
    TemplateVersion.objects.bulk_create(rows)
    return default


@transaction.atomic
def template_create(*, client: Service, name: str, subject: str, html_body: str, text_body: str = "",
                    variants: Variants | None = None) -> TemplateVersion:
    """Create the client's template with its first version (raises TemplateError on bad syntax)."""
    template = Template.objects.create(client=client, name=name)
    return _add_version(template=template, number=1, subject=subject, html_body=html_body,
                        text_body=text_body, variants=variants)


@transaction.atomic
def template_update(*, template: Template, subject: str, html_body: str, text_body: str = "",
                    variants: Variants | None = None) -> TemplateVersion:
    """Add the next version; the row lock serialises concurrent edits of one template."""
    locked = Template.objects.select_for_update().get(pk=template.pk)
    current = locked.current_version
    return _add_version(template=locked, number=(current.version if current else 0) + 1,
                        subject=subject, html_body=html_body, text_body=text_body, variants=variants)


def template_deactivate(*, template: Template) -> None:
    """Soft delete: messages and campaigns keep the versions they pinned."""
    Template.objects.filter(pk=template.pk).update(is_active=False)
    templates_changed()  # an update() sends no post_save


def template_version_get_current(*, client_id: str | None, reference: str | int) -> TemplateVersion | None:
    """The newest default-locale version of the client's active template named by id or by name.

    Only the client's own templates, whatever its scopes: what a send renders belongs to the
    sender (decision 50). Another client's template is None, like a missing one.
    """
    templates = Template.objects.filter(is_active=True, client_id=client_id)
    text = str(reference)
    if text.isascii() and text.isdigit():
        if len(text) > 18:  # beyond bigint: no such id (and no DataError 500)
            return None
        templates = templates.filter(pk=int(text))
    else:
        templates = templates.filter(name=reference)
    return (
        TemplateVersion.objects.filter(template__in=templates, locale="")
        .select_related("template")
        .order_by("-version")
        .first()
    )


def template_version_for_send(*, client_id: str | None, reference: str | int) -> TemplateVersion:
    """The version a send request names (`template` / `template_id`), or the 400 that names it."""
    version = _current_version_cached(client_id=client_id, reference=reference)
    if version is None:
        raise serializers.ValidationError(f"No active template {reference!r}.")
    return version


# --- the per-process cache of current versions ---------------------------------------------------

_GENERATION = ("templates", "generation")
# A bump lost to a Redis outage is made good after this long.
_MAX_AGE_SECONDS = 60.0


class _Cache:
    """Current versions read under one generation of the Redis counter."""

    def __init__(self, generation: bytes | object | None) -> None:
        self.generation = generation
        self.born = time.monotonic()
        self.versions: dict[tuple[str, str], TemplateVersion] = {}

    def serves(self, generation: bytes | None) -> bool:
        return self.generation == generation and time.monotonic() - self.born < _MAX_AGE_SECONDS


_UNSEEN = object()
_current = _Cache(_UNSEEN)


def _current_version_cached(*, client_id: str | None, reference: str | int) -> TemplateVersion | None:
    """template_version_get_current through the cache. A lookup stores into the cache object it
    started with: when another thread has meanwhile replaced it (a newer generation), the store
    lands in the discarded one, so a version read before a change is never kept after it."""
    global _current
    try:
        generation = get_redis().get(redis_key(*_GENERATION))
    except redis.RedisError as exc:
        logger.warning("template cache unavailable: %s", exc)
        return template_version_get_current(client_id=client_id, reference=reference)
    cache = _current
    if not cache.serves(generation):
        cache = _current = _Cache(generation)
    key = (str(client_id), str(reference))
    version = cache.versions.get(key)
    if version is None:
        version = template_version_get_current(client_id=client_id, reference=reference)
        if version is not None:  # a miss is a 400, not worth remembering
            cache.versions[key] = version
    return version


def templates_changed() -> None:
    """A template or version changed: this process forgets its cache now, every process once the
    change commits (a process reading in between may cache the old row: the bump clears it)."""
    global _current
    _current = _Cache(_UNSEEN)
    transaction.on_commit(_bump_generation)


def _bump_generation() -> None:
    try:
        get_redis().incr(redis_key(*_GENERATION))
    except redis.RedisError as exc:
        # Other processes keep the old version for up to _MAX_AGE_SECONDS.
        logger.error("could not announce a template change: %s", exc)


def forget_changed_template(sender: type, **kwargs: object) -> None:
    """post_save/post_delete receiver for Template and TemplateVersion."""
    templates_changed()
