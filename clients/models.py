"""Services (the tenants) and their credentials (issue 27, decision 102).

A Service owns everything a caller creates: templates, contacts, lists, segments, campaigns,
schedules, messages, events, statistics, its rate budget and the suppressions it caused. The
owner column of those tables keeps its historical name `client_id` and points at the service.

A service has many API keys, each with a name, a type (clients/key_types.py), scopes that are a
subset of the service's, optional expiry, and created / last-used times. Only a key's public
prefix and a SHA-512 hash are stored (djangorestframework-api-key), so a database dump reveals
no usable key; the hash is compared in constant time.
"""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import Value
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager

from clients.key_types import KeyType
from clients.rates import validate_rate
from clients.scopes import default_scopes


def new_service_id() -> str:
    return f"svc_{secrets.token_hex(8)}"


class Service(models.Model):
    """The tenant. Its id is a string: a service migrated from an API client keeps that client's
    id, so no owner column of any table (up to hundreds of millions of message rows) is
    rewritten by the migration (decision 102)."""

    id = models.CharField(max_length=150, primary_key=True, default=new_service_id, editable=False)
    name = models.CharField(max_length=100)
    scopes = models.JSONField(
        default=default_scopes, blank=True,
        help_text="What the service's keys may be given: send, campaigns, schedules, analytics "
                  "(read-only), keys, admin",
    )
    rate_limit = models.CharField(
        max_length=20, blank=True, default="", validators=[validate_rate],
        help_text="Requests per service and endpoint class, shared by all its keys, e.g. "
                  "100/min; empty: the default.",
    )
    endpoint_rate_limits = models.JSONField(
        default=dict, blank=True,
        help_text='Overrides per endpoint class, e.g. {"send": "10/s", "templates": "30/min"}.',
    )
    # How long its messages keep personal data and metadata, per stream (clients/retention.py,
    # decision 120): only what was set, {"broadcast": {"personal_data_days": 3}}; the rest
    # follows the settings' defaults. A database default too: a process of the release before
    # (a rolling deploy) inserts services without the column.
    retention = models.JSONField(
        default=dict, db_default=Value({}, output_field=models.JSONField()), blank=True,
        help_text="Days per stream, only what differs from the defaults: "
                  '{"transactional": {"personal_data_days": 7, "metadata_days": 90}, "broadcast": {...}}.',
    )
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class RetentionMark(models.Model):
    """How far one personal-data walk has gone (clients/retention.py): every row of its table
    (and service, and stream) before (`through_at`, `through_id`) is done. The walks over
    append-only tables (the event log, ESP events, webhook bodies) resume here instead of
    reading again the rows they already scrubbed."""

    key = models.CharField(max_length=200, primary_key=True)
    through_at = models.DateTimeField(null=True, blank=True)
    through_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.through_at} #{self.through_id}"


class ApiKey(AbstractAPIKey):
    objects = BaseAPIKeyManager()
    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="api_keys")
    key_type = models.CharField(max_length=4, choices=KeyType.choices, default=KeyType.LIVE)
    scopes = models.JSONField(default=default_scopes, blank=True,
                              help_text="A subset of the service's scopes.")
    rate_limit = models.CharField(
        max_length=20, blank=True, default="", validators=[validate_rate],
        help_text="A lower limit for this key alone (never above the service's); empty: none.",
    )
    endpoint_rate_limits = models.JSONField(
        default=dict, blank=True, help_text="Lower limits per endpoint class for this key alone.",
    )
    created_by = models.CharField(max_length=150, blank=True, default="",
                                  help_text="Who made the key: a user, a key or a command.")
    # Refreshed at most once a minute (clients/services.py), never a write per request.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API key"
        verbose_name_plural = "API keys"


class TeamMember(models.Model):
    """An address a team key may send to (GOV.UK Notify's team and guest list)."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="team_members")
    email = models.EmailField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["service", "email"],
                                               name="team_member_service_email_unique")]

    def __str__(self) -> str:
        return self.email


class IdempotencyRecord(models.Model):
    """One `Idempotency-Key` a service sent, with the response to replay (clients/idempotency.py).

    Keys belong to the service, so a retry through a rotated key replays the first answer. The
    row is inserted in the first request's own transaction, so while that request runs it is
    uncommitted and a duplicate's INSERT waits on it; it commits with the request's work and
    the response. `status_code` NULL is a row an older release committed before its work.
    """

    client = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of method, path and body")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    locked_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "key"], name="idempotency_client_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status_code or 'in progress'})"


# The OAuth2 client model lives in its own module; imported here so Django registers it.
from clients.oauth_models import OAuthClient  # noqa: E402, F401
