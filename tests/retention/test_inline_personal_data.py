"""What holds for both kinds of inline addresses the retention strips, an ended campaign's audience
(decision 130) and a cancelled schedule's definition (decision 132): a service with a longer
retention keeps them longer; a deleted service's rows go under the defaults; a dry run counts; a
second run finds nothing; a step out of time removes nothing; the pick reads the due index. What
is each kind's own: test_campaign_audiences.py, test_schedule_definitions.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from clients.personal_data import ExpireRun, retention_policies, stream_cutoffs
from clients.services import service_create
from tests import factories
from tests.retention.helpers import INLINE_COLUMNS, InlineColumn, expire

pytestmark = pytest.mark.django_db


@pytest.fixture(params=INLINE_COLUMNS, ids=lambda kind: kind.step.what)
def kind(request) -> InlineColumn:
    request.param.clear_keys()
    yield request.param
    request.param.clear_keys()


def test_a_longer_broadcast_retention_keeps_them_longer_and_a_deleted_service_has_the_defaults(
        kind, settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    patient = factories.owner()
    patient.retention = {"broadcast": {"personal_data_days": 30}, "transactional": {"personal_data_days": 2}}
    patient.save()
    kept = kind.make(10)
    other, _ = service_create(name="other")
    gone_short = kind.make(10, client=other)
    gone, _ = service_create(name="gone")
    orphan = kind.make(8, client=gone)
    orphan_young = kind.make(5, client=gone)
    gone.delete()  # its rows stay, owner column NULL
    expire()
    assert [kind.scrubbed(r) for r in (kept, gone_short, orphan, orphan_young)] == [False, True, True, False]
    expire("--as-of", (timezone.now() + timedelta(days=21)).isoformat())
    assert kind.scrubbed(kept) and kind.scrubbed(orphan_young)


def test_a_dry_run_counts_then_the_run_removes_that_in_batches_and_a_second_run_finds_nothing(
        kind, settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    due = [kind.make(8 + i) for i in range(3)]
    young = kind.make(6)
    assert kind.dry_run_line in expire("--dry-run")
    assert not any(kind.scrubbed(r) for r in [*due, young])
    assert f"3 {kind.label}" in expire("--batch-size", "1")
    assert [kind.scrubbed(r) for r in [*due, young]] == [True, True, True, False]
    rows = kind.model.objects
    stamps = dict(rows.values_list("pk", "personal_data_removed_at"))
    assert f"0 {kind.label}" in expire("--dry-run")
    assert f"0 {kind.label}" in expire()
    assert dict(rows.values_list("pk", "personal_data_removed_at")) == stamps  # not rewritten


def test_a_step_out_of_time_removes_nothing(kind, settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    due = kind.make(8)
    run = ExpireRun(as_of=timezone.now(), batch_size=10, dry_run=False, policies=retention_policies(),
                    deadline=0.0)
    assert kind.step(run) == {kind.step.what: 0}
    assert not kind.scrubbed(due)


def test_the_pick_reads_the_partial_index_of_due_rows(kind):
    """10,000 copies of one due row, all already scrubbed and every other one not due in its
    kind's own way (kind.not_due_copies): the pick reads the due index, not the table."""
    seed = kind.make(30)
    table = kind.model._meta.db_table
    columns = [f.column for f in kind.model._meta.concrete_fields if f.column != "id"]
    listed = ", ".join(columns)
    copied = ", ".join(kind.not_due_copies.get(column, column) for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({listed}) SELECT {copied} FROM {table}, "
                       f"generate_series(1, 10000) g WHERE id = %s", [seed.pk])
        cursor.execute(f"ANALYZE {table}")
        run = ExpireRun(as_of=timezone.now(), batch_size=100, dry_run=False, policies=retention_policies())
        cursor.execute(f"EXPLAIN {kind.step.pick_sql}", [*stream_cutoffs(run, kind.step.stream), 100])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert kind.due_index in plan and f"Seq Scan on {table}" not in plan, plan
