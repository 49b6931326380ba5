"""The campaign index widened to cover provider and sent_at (delivery 0026, decision 134): built
on every partition, the old one dropped with short lock waits, and a new partition gets it."""

from __future__ import annotations

import threading
import time

import psycopg2
import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from core.partitions.catalog import partitions_of
from core.partitions.create import days_ensure
from core.partitions.operations import RemoveIndexFromPartitions
from core.partitions.spec import registered_table
from tests.support.migrations import latest_migrations, migrate_to

TABLE = "delivery_emailmessage"
COVER = "msg_campaign_cover_idx"
OLD = "msg_campaign_log_idx"
BEFORE = [("delivery", "0025_attempt_created_brin")]


def _indexes(prefix: str) -> dict[str, tuple[bool, str | None, str]]:
    """{index name: (valid, its parent index, definition)} of the indexes named `prefix`..."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, x.indisvalid, p.relname, pg_get_indexdef(c.oid) FROM pg_index x "
            "JOIN pg_class c ON c.oid = x.indexrelid LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
            "LEFT JOIN pg_class p ON p.oid = i.inhparent WHERE c.relname LIKE %s", [f"{prefix}%"])
        return {name: (valid, parent, definition) for name, valid, parent, definition in cursor.fetchall()}


def _leaves() -> list[str]:
    with connection.cursor() as cursor:
        return [part.name for part in partitions_of(cursor, TABLE)]


def _on_every_partition(prefix: str) -> bool:
    found = _indexes(prefix)
    leaves = _leaves()
    return (len(leaves) >= 2 and found.pop(prefix)[:2] == (True, None)
            and {name: (valid, parent) for name, (valid, parent, _) in found.items()}
            == {f"{prefix}{leaf.removeprefix(TABLE)}": (True, prefix) for leaf in leaves})


@pytest.fixture
def before_the_cover(transactional_db):
    migrate_to(BEFORE)
    yield
    migrate_to(latest_migrations())


@pytest.mark.django_db(transaction=True)
def test_the_cover_replaces_the_log_index_on_every_partition_and_back(before_the_cover):
    assert _on_every_partition(OLD) and _indexes(COVER) == {}
    migrate_to(latest_migrations())
    assert _on_every_partition(COVER) and _indexes(OLD) == {}
    assert all("INCLUDE (provider, sent_at)" in definition for *_, definition in _indexes(COVER).values())
    migrate_to(BEFORE)  # backwards: the old index built again the same way, the cover dropped
    assert _on_every_partition(OLD) and _indexes(COVER) == {}


def _children_of(index: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = to_regclass(%s)",
                       [index])
        return [row[0] for row in cursor.fetchall()]


def _relations_named(names: list[str]) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", [names])
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_the_drop_waits_for_a_long_read_by_short_tries():
    """A read holding a partition for 3 s: the drop gives up each 200 ms wait (no statement queues
    behind it longer) and succeeds on a later try, once the read has ended."""
    with connection.cursor() as cursor:  # the old index back on the parent, as before 0026
        cursor.execute(f'CREATE INDEX "{OLD}" ON "{TABLE}" (campaign_id, status, created_at DESC, id DESC)')
    children = _children_of(OLD)
    assert len(children) == len(_leaves()) >= 2
    executor = MigrationExecutor(connection)
    state_with_it = executor.loader.project_state(BEFORE)
    drop = RemoveIndexFromPartitions(model_name="emailmessage", name=OLD)
    reader = psycopg2.connect(**connection.get_connection_params())
    reader.cursor().execute(f'SELECT count(*) FROM "{_leaves()[0]}"')  # its lock held to the end
    release = threading.Timer(3.0, reader.rollback)
    release.start()
    try:
        began = time.monotonic()
        with connection.schema_editor(atomic=False) as editor:
            drop.database_forwards("delivery", editor, state_with_it, state_with_it)
        waited = time.monotonic() - began
    finally:
        release.join()
        reader.close()
    assert waited > 2.0  # it outwaited the 3 s read by short tries, none of them failing the migration
    assert _relations_named([OLD, *children]) == []
    assert _on_every_partition(COVER)


@pytest.mark.django_db(transaction=True)
def test_a_partition_created_later_gets_the_covering_index():
    with connection.cursor() as cursor:
        later = max(part.day for part in partitions_of(cursor, TABLE)) + 30
    with transaction.atomic(), connection.cursor() as cursor:
        created = days_ensure(cursor, registered_table(TABLE), [later])
    assert len(created) == 1
    valid, parent, definition = _indexes(COVER)[f"{COVER}{created[0].removeprefix(TABLE)}"]
    assert (valid, parent) == (True, COVER)
    assert "(campaign_id, status, created_at DESC, id DESC) INCLUDE (provider, sent_at)" in definition
