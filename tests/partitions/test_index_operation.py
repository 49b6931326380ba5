"""A new index on a partitioned table, built concurrently partition by partition
(core/partitions/operations.py, delivery 0025: the attempts' BRIN index on created_at)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from core.partitions.catalog import partitions_of
from core.partitions.create import days_ensure
from core.partitions.spec import registered_table
from tests.support.migrations import latest_migrations, migrate_to

TABLE = "delivery_deliveryattempt"
INDEX = "attempt_created_brin"
BEFORE = [("delivery", "0024_partitions_upkeep_schedule")]


def _indexes() -> dict[str, tuple[bool, str | None]]:
    """{index name: (valid, its parent index)} of the attempts' created_at indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, x.indisvalid, p.relname FROM pg_index x "
            "JOIN pg_class c ON c.oid = x.indexrelid LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
            "LEFT JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE c.relname LIKE %s", [f"{INDEX}%"])
        return {name: (valid, parent) for name, valid, parent in cursor.fetchall()}


def _leaves() -> list[str]:
    with connection.cursor() as cursor:
        return [part.name for part in partitions_of(cursor, TABLE)]


@pytest.fixture
def without_the_index(transactional_db):
    migrate_to(BEFORE)
    yield
    migrate_to(latest_migrations())


@pytest.mark.django_db(transaction=True)
def test_the_index_is_built_on_every_partition_and_attached(without_the_index):
    assert _indexes() == {}
    migrate_to(latest_migrations())
    found = _indexes()
    leaves = _leaves()
    assert len(leaves) >= 2
    assert found.pop(INDEX) == (True, None)
    assert found == {f"{INDEX}{leaf.removeprefix(TABLE)}": (True, INDEX) for leaf in leaves}


@pytest.mark.django_db(transaction=True)
def test_a_build_that_stopped_halfway_is_finished(without_the_index):
    """A run interrupted after the parent's index and one partition's (unattached) resumes."""
    first, *rest = _leaves()
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE INDEX "{INDEX}" ON ONLY "{TABLE}" USING brin (created_at)')
        leaf_index = f"{INDEX}{first.removeprefix(TABLE)}"
        cursor.execute(f'CREATE INDEX "{leaf_index}" ON "{first}" USING brin (created_at)')
    assert _indexes()[INDEX] == (False, None)  # no rows until every partition's is attached
    migrate_to(latest_migrations())
    found = _indexes()
    assert found[INDEX] == (True, None)
    assert all(found[f"{INDEX}{leaf.removeprefix(TABLE)}"] == (True, INDEX) for leaf in [first, *rest])


@pytest.mark.django_db(transaction=True)
def test_a_partition_created_later_gets_the_index():
    with connection.cursor() as cursor:
        later = max(part.day for part in partitions_of(cursor, TABLE)) + 30
    with transaction.atomic(), connection.cursor() as cursor:
        created = days_ensure(cursor, registered_table(TABLE), [later])
    assert len(created) == 1
    assert _indexes()[f"{INDEX}{created[0].removeprefix(TABLE)}"] == (True, INDEX)
