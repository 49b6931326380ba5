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


def latest_migrations() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
