"""The owner of rows created before tenancy (decision 50), for the migrations that add owners.

Before tenancy every client saw every template, contact, list and segment, so a deployment
was in effect one tenant; its rows go to the oldest API client, the one its integration was
set up with. A database with such rows but no client gets a revoked placeholder client, visible
to the admin scope and the Django admin, who can move the rows to a real client.
"""

from __future__ import annotations

import secrets
from typing import Any

PLACEHOLDER_NAME = "pre-tenancy rows (placeholder)"


def legacy_owner_id(apps: Any) -> str:
    """The id of the oldest API client, creating a revoked placeholder when there is none."""
    api_client = apps.get_model("clients", "ApiClient")
    oldest = api_client.objects.order_by("created").values_list("id", flat=True).first()
    if oldest is not None:
        return oldest
    prefix = secrets.token_hex(4)
    placeholder = api_client.objects.create(
        id=f"{prefix}.placeholder", prefix=prefix, hashed_key="!", name=PLACEHOLDER_NAME,
        revoked=True, scopes=[],
    )
    return placeholder.id


def owner_backfill(apps: Any, app_label: str, model_names: list[str]) -> None:
    """Give every row of these models without an owner the legacy owner (only if there are any)."""
    models = [apps.get_model(app_label, name) for name in model_names]
    if not any(model.objects.filter(client__isnull=True).exists() for model in models):
        return
    owner = legacy_owner_id(apps)
    for model in models:
        model.objects.filter(client__isnull=True).update(client_id=owner)
