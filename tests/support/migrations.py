"""Move the test database to given migrations: tests of data migrations."""

from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_to(targets: list[tuple[str, str]]) -> Apps:
    """Migrate to `targets` and return the historical models as of them."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def old_template_version(apps: Apps) -> object:
    """A template version owned as before issue 27: by an API client (rows of an old state must
    be written with that state's models)."""
    client = apps.get_model("clients", "ApiClient").objects.create(
        id="oldowner.x", prefix="oldowner", hashed_key="x", name="old owner")
    template = apps.get_model("templates", "Template").objects.create(client_id=client.pk, name="old")
    return apps.get_model("templates", "TemplateVersion").objects.create(
        template=template, version=1, subject="s", html_body="<p>b</p>")


def latest_migrations() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
