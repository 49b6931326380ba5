"""Issue 27's migration on populated tables: each API client becomes a service holding that
client's row as its first key; its rows, its key, its scopes and its rate limit keep working."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient
from rest_framework_api_key.crypto import KeyGenerator

from clients.key_cache import api_key_cache_forget
from tests.support.migrations import latest_migrations, migrate_to

BEFORE_SERVICES = [("clients", "0003_idempotency_record"), ("templates", "0003_template_owner"),
                   ("audience", "0004_suppression_caused_by"),
                   ("campaigns", "0007_campaign_fanout_ranges"), ("scheduling", "0001_initial"),
                   ("delivery", "0012_alter_providereventcoverage_options"),
                   ("feedback", "0005_alter_webhookdelivery_options")]


def _old_client(apps, name: str, **fields) -> tuple[object, str]:
    """An API client made as the old code made one, with a key that works."""
    key, prefix, hashed_key = KeyGenerator().generate()
    client = apps.get_model("clients", "ApiClient").objects.create(
        id=f"{prefix}.{hashed_key}", prefix=prefix, hashed_key=hashed_key, name=name, **fields)
    return client, key


@pytest.mark.django_db(transaction=True)
def test_each_client_becomes_a_service_and_its_key_rows_and_limits_keep_working():
    old = migrate_to(BEFORE_SERVICES)
    crm, crm_key = _old_client(old, "crm", scopes=["send", "analytics"], rate_limit="7/min",
                               endpoint_rate_limits={"send": "5/min"})
    ops, ops_key = _old_client(old, "ops", scopes=["admin"])
    template = old.get_model("templates", "Template").objects.create(client_id=crm.pk, name="otp")
    old.get_model("templates", "TemplateVersion").objects.create(
        template=template, version=1, subject="Code {{ code }}", html_body="<p>{{ code }}</p>")
    contact = old.get_model("audience", "Contact").objects.create(client_id=crm.pk, email="ada@example.com")
    record = old.get_model("clients", "IdempotencyRecord").objects.create(
        client_id=crm.pk, key="k", fingerprint="f", status_code=201, response_body={"id": 1},
        locked_at="2026-12-01T00:00:00Z", expires_at="2099-01-01T00:00:00Z")

    latest = migrate_to(latest_migrations())
    api_key_cache_forget()

    services = latest.get_model("clients", "Service").objects
    service = services.get(pk=crm.pk)
    assert (service.name, service.rate_limit, service.endpoint_rate_limits) == (
        "crm", "7/min", {"send": "5/min"})
    assert service.scopes == ["send", "analytics", "keys"]  # the new scope, for the service
    assert services.get(pk=ops.pk).scopes == ["admin"]
    key_row = latest.get_model("clients", "ApiKey").objects.get(pk=crm.pk)
    assert key_row.service_id == crm.pk and key_row.key_type == "live"
    assert key_row.scopes == ["send", "analytics"]  # the key keeps exactly what it held
    assert (key_row.rate_limit, key_row.endpoint_rate_limits) == ("", {})  # moved to the service
    assert latest.get_model("audience", "Contact").objects.get(pk=contact.pk).client_id == crm.pk
    assert latest.get_model("clients", "IdempotencyRecord").objects.get(pk=record.pk).client_id == crm.pk

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {crm_key}")  # the old key, without a type prefix
    listed = api.get("/api/v1/templates")
    assert listed.status_code == 200 and [t["id"] for t in listed.json()["results"]] == [template.pk]
    described = api.get("/api/v1/service").json()
    assert (described["id"], described["rate_limit"]) == (crm.pk, "7/min")
    assert api.get("/api/v1/keys").status_code == 403  # the key did not gain `keys`
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Api-Key {ops_key}")
    assert admin.get("/api/v1/templates").status_code == 200
