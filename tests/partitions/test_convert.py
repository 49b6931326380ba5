"""An existing install moved into day partitions while it runs (issue 30, decision 123).

The test database is taken back to the release before the partitions (delivery 0022, feedback
0006: the migrations' way back makes each table one plain table again), filled with rows of
several past days under small identity ids, and migrated forward with the migration's row limit
lowered: the tables stay unpartitioned, as a big install's do. Then `manage.py partition_tables`
moves them, and every row must arrive as it was, in a partition named by its day.
"""

from __future__ import annotations

import random
import re
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, close_old_connections, connection, transaction

from core.partitions import convert as convert_module
from core.partitions.catalog import is_partitioned, partitions_of
from core.partitions.convert import STATE_TABLE
from core.partitions.create import parent_indexes
from core.partitions.revert import revert_if_small
from core.partitions.routing import floors_forget
from core.partitions.spec import day_floor, day_number, partition_name, registered, span_start
from delivery.models import EmailMessage
from delivery.partitioning import ATTEMPTS, MESSAGES
from feedback.models import MessageEventMark
from feedback.normalize import EventType
from feedback.partitioning import EVENTS, MARKS
from feedback.services.processing import events_process
from testkit import processes
from tests import factories
from tests.feedback.helpers import event
from tests.support.migrations import latest_migrations, migrate_to

BEFORE = [("delivery", "0022_personal_data_indexes"), ("feedback", "0006_owner_is_the_service")]
SPECS = (MESSAGES, ATTEMPTS, EVENTS, MARKS)
TODAY = day_number(datetime.now(UTC))
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "1"}}
# The message columns a copy of a row repeats (id: the table's own; the key must be unique).
_VARIED = ("id", "idempotency_key", "recipient", "created_at", "status", "error")


def _sql(statement: str, params: list | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def _noon(day: int, seconds: int = 0) -> datetime:
    return datetime(1970, 1, 1, 12, tzinfo=UTC) + timedelta(days=day, seconds=seconds)


def _message_columns() -> list[str]:
    rows = _sql("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                "AND NOT attisdropped ORDER BY attnum", [MESSAGES.table])
    return [row[0] for row in rows if row[0] not in _VARIED]


def _messages(day: int, count: int, *, tag: str, status: str = "SENT") -> None:
    """`count` messages created on `day` (ids from the old table's identity, so after the
    ones before), copies of the first message but for their key, address, time and status."""
    kept = ", ".join(_message_columns())
    _sql(f"INSERT INTO {MESSAGES.table} ({kept}, idempotency_key, recipient, created_at, status, error) "
         f"SELECT {kept}, %s || g, 'r' || g || '@example.com', %s + g * interval '1 second', %s, '' "
         f"FROM {MESSAGES.table} t, generate_series(1, %s) g WHERE t.id = (SELECT min(id) FROM "
         f"{MESSAGES.table}) ORDER BY g", [f"legacy:{tag}:", _noon(day), status, count])


def _old_install_rows() -> None:
    """Rows of several past days under the old layout's ids. Two days' ids interleave (a few
    rows of day -120 written after day -119's first), and one row of day -60 has an id among
    day -100's (a clock a day off): none of them may be dropped before its own day's turn."""
    version = factories.template_version()
    _sql(f"INSERT INTO {MESSAGES.table} (recipient, context, template_version_id, priority, status, "
         "provider, provider_message_id, attempts, idempotency_key, claim_token, error, created_at, "
         "cancel_key, client_id) VALUES ('first@example.com', '{\"name\": \"Ada\"}', %s, 0, 'SENT', "
         "'smtp', '', 1, 'legacy:first', '', '', %s, '', %s)",
         [version.pk, _noon(TODAY - 120), version.template.client_id])
    for day, count, tag in ((TODAY - 120, 20, "a"), (TODAY - 119, 20, "b"), (TODAY - 120, 5, "c"),
                            (TODAY - 100, 20, "d"), (TODAY - 60, 1, "skew"), (TODAY - 99, 20, "e"),
                            (TODAY - 1, 20, "f")):
        _messages(day, count, tag=tag)
    _messages(TODAY, 10, tag="today", status="QUEUED")
    _sql(f"INSERT INTO {ATTEMPTS.table} (message_id, provider, outcome, response_code, error, duration_ms, "
         f"created_at) SELECT id, 'smtp', 'accepted', '250', '', 5, created_at + interval '1 second' "
         f"FROM {MESSAGES.table} ORDER BY id")
    _sql(f"INSERT INTO {EVENTS.table} (message_id, provider, provider_event_id, event_type, bounce_type, "
         "recipient, url, occurred_at, received_at, raw) SELECT id, 'smtp', 'evt-' || id, 'delivered', '', "
         f"recipient, '', created_at, created_at + interval '1 minute', '{{}}' FROM {MESSAGES.table} "
         "WHERE id % 2 = 0 ORDER BY id")
    _sql(f"INSERT INTO {MARKS.table} (message_id, event_type, first_at) SELECT message_id, 'delivered', "
         f"occurred_at FROM {EVENTS.table} ORDER BY id")


def _fingerprint(table: str) -> tuple[int, str]:
    """Row count and the md5 of every row's text in id order: equal, the content is identical."""
    return _sql(f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) "
                f"FROM {table} t")[0]


def _partitioned() -> dict[str, bool]:
    with connection.cursor() as cursor:
        return {spec.table: is_partitioned(cursor, spec.table) for spec in SPECS}


def _partition_tables(*args: str) -> str:
    out = StringIO()
    call_command("partition_tables", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def new_layout_after(transactional_db):
    """After the test, the four tables as a new install has them (no old ranges), for the
    tests that run after it on this database."""
    yield
    close_old_connections()
    for spec in reversed(registered()):  # the marks first: they take their days from the messages
        convert_module.abort(spec)  # a test stopped halfway leaves no copy behind
        with transaction.atomic():  # as the migrations' way back runs it
            _sql(f"DELETE FROM {spec.table}")
            revert_if_small(spec)
    _partition_tables()
    floors_forget()


@pytest.fixture
def existing_install(new_layout_after, monkeypatch):
    """The test database as a big install leaves it after this release's migrations: rows of
    past days in the four tables, which stay unpartitioned."""
    migrate_to(BEFORE)
    _old_install_rows()
    monkeypatch.setattr(convert_module, "MIGRATION_ROW_LIMIT", 0)  # as over 100,000 rows
    migrate_to(latest_migrations())
    floors_forget()
    assert _partitioned() == dict.fromkeys(_partitioned(), False)


@pytest.mark.django_db(transaction=True)
def test_every_row_arrives_as_it_was_in_a_partition_of_its_day_with_every_index(existing_install):
    before = {spec.table: _fingerprint(spec.table) for spec in SPECS}
    with connection.cursor() as cursor:
        indexes = {spec.table: _indexes(cursor, spec.table) for spec in SPECS}

    out = _partition_tables()

    assert out.splitlines() == [f"{spec.table}: partitioned (1 batches copied)"
                                for spec in registered()], out
    assert {spec.table: _fingerprint(spec.table) for spec in SPECS} == before
    assert _partitioned() == dict.fromkeys(_partitioned(), True)
    assert not _sql(f"SELECT * FROM {STATE_TABLE}")
    assert not _sql("SELECT relname FROM pg_class WHERE relname ~ '__(new|old|n|o)$'")  # nothing left over
    with connection.cursor() as cursor:
        parts = {spec.table: partitions_of(cursor, spec.table) for spec in SPECS}
        assert {spec.table: _indexes(cursor, spec.table) for spec in SPECS} == indexes
    for spec in SPECS:
        _assert_rows_in_their_days_range(spec.table)
    # A range per week of old rows; weeks whose ids overlap share one, named by its latest day.
    last_week = [TODAY] if span_start(TODAY - 1) == span_start(TODAY) else [TODAY - 1, TODAY]
    legacy_days = [TODAY - 119, TODAY - 100, TODAY - 60, *last_week]
    assert [p.name for p in parts[MESSAGES.table] if p.legacy] == [
        partition_name(MESSAGES.table, day, legacy=True) for day in legacy_days]
    assert [p.name for p in parts[MARKS.table]] == [p.name.replace(MESSAGES.table, MARKS.table)
                                                     for p in parts[MESSAGES.table]]
    for spec in SPECS:
        coded = [p for p in parts[spec.table] if not p.legacy]  # today's week and the coming days
        assert all(any(p.lower <= day_floor(day) < p.upper for p in coded)
                   for day in range(TODAY, TODAY + 8)), (spec.table, coded)
        _assert_each_partition_has_the_parents_indexes(spec, [p.name for p in parts[spec.table]],
                                                       [name for name, _ in indexes[spec.table]])
    constraints = {row[0] for row in _sql("SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u') "
                                          "AND conrelid = ANY(%s::regclass[])", [[s.table for s in SPECS]])}
    assert constraints == {f"{spec.table}_pkey" for spec in SPECS} | {"mark_message_type_unique"}
    _assert_a_duplicate_key_within_a_day_is_refused()


def _indexes(cursor, table: str) -> list[tuple[str, str]]:
    """The table's indexes backing no constraint, as they were defined on the plain table."""
    return [(name, definition.replace(" ON ONLY ", " ON "))
            for name, definition in parent_indexes(cursor, table)]


def _assert_rows_in_their_days_range(table: str) -> None:
    """No row sits in a partition named by a day before its own (the range's last day is the
    day in its name, one more for an old range: Partition.last_day)."""
    spec = next(s for s in SPECS if s.table == table)
    column = "created_at" if spec.bounds_from else spec.time_column
    source = f"{table} t JOIN {MESSAGES.table} m ON m.id = t.message_id" if spec.bounds_from else f"{table} t"
    day_of = (f"floor(extract(epoch FROM {'m.' if spec.bounds_from else 't.'}{column}) / 86400)::int")
    rows = _sql(f"SELECT t.tableoid::regclass::text, max({day_of}) FROM {source} GROUP BY 1")
    with connection.cursor() as cursor:
        last_day = {p.name: p.last_day for p in partitions_of(cursor, table)}
    late = {name: day for name, day in rows if day > last_day[name]}
    assert not late, f"{table}: rows in a partition named before their day: {late}"


def _assert_each_partition_has_the_parents_indexes(spec, partitions: list[str], indexes: list[str]) -> None:
    leaf_unique = [unique.name for unique in spec.leaf_unique]
    for name in partitions:
        suffix = name.removeprefix(spec.table)
        found = dict(_sql("SELECT i.relname, x.indisunique FROM pg_index x JOIN pg_class i ON "
                          "i.oid = x.indexrelid WHERE x.indrelid = %s::regclass", [name]))
        for index in indexes:
            assert f"{index}{suffix}" in found, (name, index, sorted(found))
        for unique in leaf_unique:
            assert found.get(f"{unique}{suffix}") is True, (name, unique, sorted(found))


def _assert_a_duplicate_key_within_a_day_is_refused() -> None:
    columns = ", ".join([*_message_columns(), "recipient", "created_at", "status", "error"])
    # An old row's key again in its range: the first (from MINVALUE), then today's (to today's
    # first coded id).
    for key, new_id in (("legacy:a:1", -1), ("legacy:today:1", 1_000_000)):
        with pytest.raises(IntegrityError, match="msg_idempotency_key_uniq"), transaction.atomic():
            _sql(f"INSERT INTO {MESSAGES.table} (id, idempotency_key, {columns}) SELECT %s, "
                 f"idempotency_key, {columns} FROM {MESSAGES.table} WHERE idempotency_key = %s",
                 [new_id, key])
    (day_id,) = _sql(f"INSERT INTO {MESSAGES.table} (idempotency_key, {columns}) SELECT 'coded-k', "
                     f"{columns} FROM {MESSAGES.table} LIMIT 1 RETURNING id")[0]
    assert day_id >> 32 == TODAY  # a new row's id is of today
    with pytest.raises(IntegrityError, match="msg_idempotency_key_uniq"), transaction.atomic():
        _sql(f"INSERT INTO {MESSAGES.table} (idempotency_key, {columns}) SELECT 'coded-k', {columns} "
             f"FROM {MESSAGES.table} LIMIT 1")


class _Writer(threading.Thread):
    """The live system's writes to the messages table on a connection of its own: INSERTs,
    UPDATEs and DELETEs of random rows (copied or not yet), each its own transaction, until
    stopped, at most `limit` statements or `seconds`. It keeps what the table must hold."""

    def __init__(self, live: list[int], *, limit: int = 4000, seconds: float = 90.0):
        super().__init__(daemon=True)
        self.live, self.limit, self.seconds = list(live), limit, seconds
        self.template = self.live.pop(0)  # copied by the inserts, never deleted
        self.inserted: set[int] = set()
        self.deleted: set[int] = set()
        self.updated: dict[int, str] = {}
        self.done = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(30)
        deadline = time.monotonic() + self.seconds
        columns = ", ".join(c for c in [*_message_columns(), "recipient", "created_at", "status"]
                            if c != "idempotency_key")
        try:
            while not self.stop.is_set() and self.done < self.limit and time.monotonic() < deadline:
                self._one(rng, columns)
                self.done += 1
        except Exception as error:  # noqa: BLE001 - the test reports it
            self.error = error
        finally:
            connection.close()

    def _one(self, rng: random.Random, columns: str) -> None:
        choice = rng.random()
        if choice < 0.4:
            (row_id,) = _sql(f"INSERT INTO {MESSAGES.table} (idempotency_key, error, {columns}) "
                             f"SELECT %s, '', {columns} FROM {MESSAGES.table} WHERE id = %s RETURNING id",
                             [f"writer:{self.done}", self.template])[0]
            self.inserted.add(row_id)
            self.live.append(row_id)
            return
        row_id = self.live.pop(rng.randrange(len(self.live)))
        if choice < 0.75:
            value = f"update {self.done}"
            rows = _sql(f"UPDATE {MESSAGES.table} SET error = %s, status = 'FAILED' WHERE id = %s "
                        "RETURNING id", [value, row_id])
            assert rows == [(row_id,)], (row_id, rows)
            self.updated[row_id] = value
            self.live.append(row_id)
        else:
            rows = _sql(f"DELETE FROM {MESSAGES.table} WHERE id = %s RETURNING id", [row_id])
            assert rows == [(row_id,)], (row_id, rows)
            self.deleted.add(row_id)
            self.updated.pop(row_id, None)

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.done < count and self.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.done >= count and self.error is None, (self.done, self.error)


def _row_digests(table: str) -> dict[int, str]:
    return dict(_sql(f"SELECT id, md5(t::text) FROM {table} t"))


@pytest.mark.django_db(transaction=True)
def test_rows_written_during_the_move_are_neither_lost_nor_doubled_nor_brought_back(existing_install):
    _messages(TODAY - 2, 1500, tag="bulk")
    before = _row_digests(MESSAGES.table)
    writer = _Writer(sorted(before))
    writer.start()
    try:
        writer.wait_for(50)
        started = writer.done
        out = _partition_tables("--table", MESSAGES.table, "--batch-size", "50", "--pause", "0.02")
        during = writer.done - started
        writer.wait_for(writer.done + 50)  # and after the swap, on the new layout
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    assert writer.error is None, writer.error
    assert "partitioned (" in out, out
    assert during >= 100, f"only {during} writes during the move"

    after = _sql(f"SELECT id, count(*) FROM {MESSAGES.table} GROUP BY id")
    counts = dict(after)
    expected = (set(before) | writer.inserted) - writer.deleted
    lost = expected - set(counts)
    doubled = {row_id for row_id, count in counts.items() if count > 1}
    back = writer.deleted & set(counts)
    unexpected = set(counts) - expected
    values = dict(_sql(f"SELECT id, error FROM {MESSAGES.table} WHERE id = ANY(%s)", [list(writer.updated)]))
    stale = {row_id for row_id, value in writer.updated.items() if values.get(row_id) != value}
    digests = _row_digests(MESSAGES.table)
    untouched = set(before) - writer.deleted - set(writer.updated)
    changed = {row_id for row_id in untouched if digests.get(row_id) != before[row_id]}
    assert (len(lost), len(doubled), len(back), len(unexpected), len(stale), len(changed)) == (0,) * 6, (
        f"lost {len(lost)}, doubled {len(doubled)}, deleted but back {len(back)}, unexpected "
        f"{len(unexpected)}, stale updates {len(stale)}, changed untouched rows {len(changed)}")
    assert writer.inserted and writer.deleted and writer.updated


@pytest.mark.django_db(transaction=True)
def test_a_move_stopped_after_some_batches_or_right_after_its_prepare_finishes_when_run_again(
        existing_install):
    _messages(TODAY - 2, 300, tag="bulk")
    before = {spec.table: _fingerprint(spec.table) for spec in SPECS}

    out = _partition_tables("--table", MESSAGES.table, "--batch-size", "40", "--max-batches", "2")
    assert out.strip() == f"{MESSAGES.table}: stopped after 2 batches; run again to go on"
    assert _sql(f"SELECT table_name, copied_rows FROM {STATE_TABLE}") == [(MESSAGES.table, 80)]
    assert _partitioned()[MESSAGES.table] is False
    out = _partition_tables("--table", MESSAGES.table, "--batch-size", "40")
    assert out.strip() == f"{MESSAGES.table}: partitioned (9 batches copied)"  # 417 - 80 rows left
    assert _fingerprint(MESSAGES.table) == before[MESSAGES.table]

    # Stopped between the prepare and the first batch (a crash there), while the app writes.
    out = _partition_tables("--table", ATTEMPTS.table, "--max-batches", "0")
    assert out.strip() == f"{ATTEMPTS.table}: stopped after 0 batches; run again to go on"
    first, second = _sql(f"SELECT id FROM {ATTEMPTS.table} ORDER BY id LIMIT 2")
    _sql(f"UPDATE {ATTEMPTS.table} SET error = 'later' WHERE id = %s", [first[0]])
    _sql(f"DELETE FROM {ATTEMPTS.table} WHERE id = %s", [second[0]])
    _sql(f"INSERT INTO {ATTEMPTS.table} (message_id, provider, outcome, response_code, error, duration_ms, "
         "created_at) VALUES (1, 'smtp', 'accepted', '250', '', 7, now())")
    before[ATTEMPTS.table] = _fingerprint(ATTEMPTS.table)

    out = _partition_tables()
    assert out.splitlines() == [f"{spec.table}: already partitioned" if spec is MESSAGES else
                                f"{spec.table}: partitioned (1 batches copied)" for spec in registered()], out
    assert {spec.table: _fingerprint(spec.table) for spec in SPECS} == before


@pytest.mark.django_db(transaction=True)
def test_a_move_whose_last_rows_were_deleted_meanwhile_still_swaps(existing_install):
    """The app deleted the rows with the highest ids the copy was to reach: the copy is finished
    when nothing is left up to them, not when it has seen the last id."""
    _messages(TODAY - 2, 200, tag="bulk")
    out = _partition_tables("--table", MESSAGES.table, "--batch-size", "50", "--max-batches", "2")
    assert out.strip() == f"{MESSAGES.table}: stopped after 2 batches; run again to go on"
    _sql(f"DELETE FROM {MESSAGES.table} WHERE id IN "
         f"(SELECT id FROM {MESSAGES.table} ORDER BY id DESC LIMIT 60)")
    before = _fingerprint(MESSAGES.table)

    out = _partition_tables("--table", MESSAGES.table, "--batch-size", "50")

    assert re.fullmatch(rf"{MESSAGES.table}: partitioned \(\d+ batches copied\)", out.strip()), out
    assert _fingerprint(MESSAGES.table) == before


@pytest.mark.django_db(transaction=True)
def test_a_killed_move_is_taken_up_by_the_next_run_and_two_runs_never_overlap(existing_install, tmp_path):
    _messages(TODAY - 2, 600, tag="bulk")
    before = _fingerprint(MESSAGES.table)
    first = processes.ManagedProcess(
        "partition_tables", [sys.executable, "manage.py", "partition_tables", "--table", MESSAGES.table,
                             "--batch-size", "20", "--pause", "0.3", "-v", "2"],
        processes.subprocess_env(), tmp_path).start()
    try:
        first.wait_for_log("(batch 2)", timeout=60)
        with pytest.raises(CommandError, match="another partition_tables is converting it"):
            _partition_tables("--table", MESSAGES.table)
    finally:
        first.kill_group(signal.SIGKILL)
    assert f"{MESSAGES.table}: prepared {MESSAGES.table}__new and its partitions" in first.log()
    ((copied,),) = _sql(f"SELECT copied_rows FROM {STATE_TABLE} WHERE table_name = %s", [MESSAGES.table])
    assert 40 <= copied < 600 and not _partitioned()[MESSAGES.table]

    out = _run_when_free("--table", MESSAGES.table, "--batch-size", "100")
    assert out.strip() == f"{MESSAGES.table}: partitioned ({-(-(717 - copied) // 100)} batches copied)", out
    assert _fingerprint(MESSAGES.table) == before


def _run_when_free(*args: str, seconds: float = 20.0) -> str:
    """partition_tables once the killed run's session is gone (its lock goes with it)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return _partition_tables(*args)
        except CommandError as refused:
            if "another partition_tables" not in str(refused) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.django_db(transaction=True)
def test_the_command_reports_each_step_and_refuses_what_it_cannot_do_in_plain_words(existing_install):
    with pytest.raises(CommandError, match=r"--table: not a partitioned table: nope \(known: "
                                           rf"{ATTEMPTS.table}, {MESSAGES.table}, "):
        _partition_tables("--table", "nope")
    with pytest.raises(CommandError, match=rf"{MARKS.table} takes its days from {MESSAGES.table}: "
                                           "convert that first"):
        _partition_tables("--table", MARKS.table)
    assert not _sql(f"SELECT * FROM {STATE_TABLE}") and not _exists(f"{MARKS.table}__new")

    out = _partition_tables("--table", MESSAGES.table, "--batch-size", "50", "-v", "2")
    lines = out.splitlines()
    assert re.fullmatch(rf"{MESSAGES.table}: swapped \(lock waited for \d+ ms, held \d+ ms\)", lines[4]), out
    assert re.fullmatch(rf"{MESSAGES.table}: dropped the old table \(\d+ ms\)", lines.pop(5)), out
    assert lines[:4] + lines[5:] == [
        f"{MESSAGES.table}: prepared {MESSAGES.table}__new and its partitions",
        f"{MESSAGES.table}: copied 50 rows (batch 1)", f"{MESSAGES.table}: copied 50 rows (batch 2)",
        f"{MESSAGES.table}: copied 17 rows (batch 3)",
        f"{MESSAGES.table}: partitioned (3 batches copied)"], out
    assert _partition_tables("--table", MESSAGES.table).strip() == f"{MESSAGES.table}: already partitioned"

    # Aborted before its swap: the old table as it was, nothing of the copy left.
    before = _fingerprint(EVENTS.table)
    _partition_tables("--table", EVENTS.table, "--max-batches", "1", "--batch-size", "10")
    assert _exists(f"{EVENTS.table}__new")
    out = _partition_tables("--table", EVENTS.table, "--abort")
    assert out.strip() == f"{EVENTS.table}: conversion aborted, the table is as it was"
    assert not _exists(f"{EVENTS.table}__new") and not _sql(f"SELECT * FROM {STATE_TABLE}")
    assert not _sql("SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass", [EVENTS.table])
    _sql(f"UPDATE {EVENTS.table} SET url = 'after abort' WHERE id = (SELECT min(id) FROM {EVENTS.table})")
    assert _fingerprint(EVENTS.table)[0] == before[0]

    # A transaction holding the table past the swap's 2 s lock timeout: the swap waits no longer
    # (the writers queued behind its lock would), and tries again.
    _partition_tables("--table", EVENTS.table, "--max-batches", "0")
    before_swap = _fingerprint(EVENTS.table)
    holder = threading.Thread(target=_hold_a_read, args=(EVENTS.table, 3.5), daemon=True)
    holder.start()
    time.sleep(0.5)
    out = _partition_tables("--table", EVENTS.table, "-v", "2")
    holder.join(timeout=30)
    assert f"{EVENTS.table}: swap waited 2 s for its lock, trying again" in out, out
    assert out.splitlines()[-1] == f"{EVENTS.table}: partitioned (1 batches copied)", out
    assert _fingerprint(EVENTS.table) == before_swap


def _hold_a_read(table: str, seconds: float) -> None:
    """A report's transaction: it read the table and is still open."""
    try:
        with transaction.atomic():
            _sql(f"SELECT count(*) FROM {table}")
            time.sleep(seconds)
    finally:
        connection.close()


def _exists(name: str) -> bool:
    return _sql("SELECT to_regclass(%s) IS NOT NULL", [name])[0][0]


@pytest.mark.django_db(transaction=True)
def test_a_small_table_is_moved_by_the_migration_and_a_run_before_the_migrations_moves_it_too(
        new_layout_after):
    migrate_to(BEFORE)
    _old_install_rows()
    before = {spec.table: _fingerprint(spec.table) for spec in SPECS}
    migrate_to(latest_migrations())  # under 100,000 rows: the migration converts them itself
    floors_forget()
    assert _partitioned() == dict.fromkeys(_partitioned(), True)
    assert {spec.table: _fingerprint(spec.table) for spec in SPECS} == before

    # Run before this release's migrations (the foreign keys to the messages still there): the
    # swap drops the keys to each table it moves, and the migrations after it find nothing to do.
    migrate_to(BEFORE)
    assert _foreign_keys()
    out = _partition_tables()
    assert out.splitlines() == [f"{spec.table}: partitioned (1 batches copied)" for spec in registered()]
    assert not _foreign_keys()
    migrate_to(latest_migrations())
    floors_forget()
    assert _partitioned() == dict.fromkeys(_partitioned(), True)
    assert {spec.table: _fingerprint(spec.table) for spec in SPECS} == before


def _foreign_keys() -> list[tuple]:
    return _sql("SELECT conname FROM pg_constraint WHERE contype = 'f' AND (conrelid = ANY(%s::regclass[]) "
                "OR confrelid = ANY(%s::regclass[]))", [[s.table for s in SPECS]] * 2)


@pytest.mark.django_db(transaction=True)
def test_after_the_move_the_api_accepts_and_replays_and_expiry_drops_the_old_days(
        existing_install, api, otp_template, settings):
    accepted = api.post("/api/v1/messages", {**OTP, "idempotency_key": "before-the-move"}, format="json")
    assert accepted.status_code == 202, accepted.content
    old_id = accepted.json()["id"]
    assert old_id < 1 << 32  # the old table's id
    # No mark yet for yesterday's messages: their range of marks is empty at the swap.
    _sql(f"DELETE FROM {MARKS.table} WHERE message_id IN (SELECT id FROM {MESSAGES.table} "
         "WHERE idempotency_key LIKE 'legacy:f:%')")

    _partition_tables()

    again = api.post("/api/v1/messages", {**OTP, "idempotency_key": "before-the-move"}, format="json")
    assert again.status_code in (200, 202) and again.json()["id"] == old_id, again.content
    new = api.post("/api/v1/messages", OTP, format="json")
    assert new.status_code == 202, new.content
    assert new.json()["id"] >> 32 == TODAY
    assert _sql(f"SELECT tableoid::regclass::text FROM {MESSAGES.table} WHERE id = %s",
                [new.json()["id"]]) == [(partition_name(MESSAGES.table, span_start(TODAY)),)]

    # An ESP's event about one of them marks it (its range is there for the marks to come).
    yesterdays = EmailMessage.objects.get(idempotency_key="legacy:f:3")
    events_process(events=[event(yesterdays, EventType.OPENED, event_id="late-open")])
    marks = MessageEventMark.objects.filter(message_id=yesterdays.pk)
    assert set(marks.values_list("event_type", flat=True)) == {"opened", "delivered"}

    settings.NOTIFIER_RETENTION_METADATA_DAYS = 90
    out = StringIO()
    call_command("expire_data", stdout=out)
    out = out.getvalue()
    for spec in (MESSAGES, ATTEMPTS, MARKS):
        for day in (TODAY - 119, TODAY - 100):
            assert f"dropped {partition_name(spec.table, day, legacy=True)}" in out, out
            assert not _exists(partition_name(spec.table, day, legacy=True))
        assert _exists(partition_name(spec.table, TODAY - 60, legacy=True))
    days = dict(_sql(f"SELECT floor(extract(epoch FROM created_at) / 86400)::int - %s, count(*) "
                     f"FROM {MESSAGES.table} GROUP BY 1", [TODAY]))
    assert days == {-99: 20, -60: 1, -1: 20, 0: 12}, days  # the day -60 row among day -100's ids kept
