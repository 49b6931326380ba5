"""A cancelled schedule's inline addresses are removed from `Schedule.definition` after its
service's broadcast personal-data retention (issue 30, decision 132): the definition keeps its
template, priority and the recipients' type, owner and count; the schedules API, its detail and
the admin answer as before. A schedule that may still fire (active, paused) is never touched;
segment and list recipients and one-off records (no definition) are never rewritten; a service
with a longer retention keeps them longer; a deleted service's schedules go under the defaults;
a row cancelled before `cancelled_at` existed counts from `updated_at`; a dry run counts; a
second run finds nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from clients.personal_data import ExpireRun, retention_policies
from clients.services import service_create
from scheduling.models import Schedule
from scheduling.personal_data import schedule_definitions_personal_data_step
from scheduling.services.recurring import schedule_run
from tests import factories
from tests.scheduling.support import clear_schedule_keys

pytestmark = pytest.mark.django_db
SS = Schedule.Status
ADDRESSES = ["ada@example.com", "grace@example.com", "edsger@example.com"]


@pytest.fixture(autouse=True)
def clean_redis():
    clear_schedule_keys()
    yield
    clear_schedule_keys()


def _definition() -> dict:
    rows = [{"email": a, "name": a.split("@")[0].title(), "timezone": "Europe/Paris", "data": {"code": a[:3]}}
            for a in ADDRESSES]
    return {"template_id": 1, "priority": "low", "metadata": {"batch": "b1"},
            "schedule": {"type": "immediate"},
            "recipients": {"type": "inline", "contacts": rows}}


def _schedule(days: float, *, status: str = SS.CANCELLED, client=None, legacy: bool = False,
              **fields) -> Schedule:
    """A recurring schedule of factories.owner() (unless `client` says) that was cancelled (or
    last changed, for another status or a `legacy` row without `cancelled_at`) `days` ago."""
    client = client or factories.owner()
    fields.setdefault("definition", _definition())
    fields.setdefault("type", Schedule.Type.RECURRING)
    made = Schedule.objects.create(client=client, name="weekly", cron="0 9 * * 1", status=status, **fields)
    at = timezone.now() - timedelta(days=days)
    Schedule.objects.filter(pk=made.pk).update(
        updated_at=at, cancelled_at=at if status == SS.CANCELLED and not legacy else None)
    return Schedule.objects.get(pk=made.pk)


def _expire(*args: str) -> str:
    out = StringIO()
    call_command("expire_data", *args, stdout=out)
    return out.getvalue()


def _scrubbed(s: Schedule) -> bool:
    row = Schedule.objects.get(pk=s.pk)
    holds = any(address in json.dumps(row.definition) for address in ADDRESSES)
    assert holds == (row.personal_data_removed_at is None), (row.definition, row.personal_data_removed_at)
    return not holds


def test_a_cancelled_schedule_loses_its_addresses_after_the_retention_and_answers_as_before(
        api, admin_client, otp_template, settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    created = api.post("/api/v1/schedules", {
        "name": "weekly digest", "type": "recurring", "cron": "0 9 * * 1", "timezone": "UTC",
        "definition": {"template_id": "otp", "recipients": {"type": "inline", "contacts": [
            {"email": a, "name": "X", "data": {"code": "123"}} for a in ADDRESSES]}}}, format="json")
    assert created.status_code == 201, created.content
    schedule_id = created.json()["id"]
    assert api.delete(f"/api/v1/schedules/{schedule_id}").json()["status"] == "cancelled"
    before = Schedule.objects.get(pk=schedule_id)
    assert before.cancelled_at is not None and _scrubbed(before) is False
    detail = api.get(f"/api/v1/schedules/{schedule_id}").json()
    listed = api.get("/api/v1/schedules").json()["schedules"]
    assert "0 schedule definitions" in _expire()  # cancelled just now: kept for the retention

    Schedule.objects.filter(pk=schedule_id).update(cancelled_at=timezone.now() - timedelta(days=8))
    assert "1 schedule definitions" in _expire()

    after = Schedule.objects.get(pk=schedule_id)
    assert _scrubbed(after)
    # Stored as the request had it (the validator only pins a topic): no owner inside.
    assert after.definition["recipients"] == {"type": "inline", "contacts": [], "count": 3}
    assert {k: v for k, v in after.definition.items() if k != "recipients"} == {
        k: v for k, v in before.definition.items() if k != "recipients"}
    assert (after.status, after.runs, after.updated_at) == (before.status, before.runs, before.updated_at)
    assert api.get(f"/api/v1/schedules/{schedule_id}").json() == detail
    assert api.get("/api/v1/schedules").json()["schedules"] == listed
    page = admin_client.get(f"/admin/scheduling/schedule/{schedule_id}/change/")
    assert page.status_code == 200 and not any(a.encode() in page.content for a in ADDRESSES)
    assert admin_client.get("/admin/scheduling/schedule/").status_code == 200
    # A stray beat fire for it launches nothing (it is cancelled), scrubbed or not.
    assert schedule_run(schedule_id=schedule_id, now=timezone.now()) is None


def test_a_schedule_that_may_still_fire_is_never_touched(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    waiting = [_schedule(400, status=status) for status in (SS.ACTIVE, SS.PAUSED)]
    cancelled = _schedule(2)
    legacy = _schedule(2, legacy=True)  # cancelled before `cancelled_at`: counts from updated_at
    young_legacy = _schedule(0.5, legacy=True)
    _expire()
    assert [_scrubbed(s) for s in [*waiting, cancelled, legacy, young_legacy]] == [False, False, True, True,
                                                                                     False]
    # Cancelled at last: it goes once its own cancellation is past the retention.
    from scheduling.services.recurring import schedule_cancel

    paused = waiting[-1]
    schedule_cancel(schedule=paused)
    _expire()
    assert not _scrubbed(paused)
    _expire("--as-of", (timezone.now() + timedelta(days=2)).isoformat())
    assert _scrubbed(paused) and not _scrubbed(waiting[0])


def test_references_and_one_off_records_stay_as_they_were(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    segment = _schedule(30, definition={"template_id": 1, "recipients": {"type": "segment", "segment_id": 4}})
    listed = _schedule(30, definition={"template_id": 1, "recipients": {"type": "list", "list_id": 3}})
    one_off = _schedule(30, definition={}, type=Schedule.Type.SCHEDULED)
    assert "0 schedule definitions" in _expire()
    for s in (segment, listed, one_off):
        row = Schedule.objects.get(pk=s.pk)
        assert (row.definition, row.personal_data_removed_at) == (s.definition, None)


def test_a_longer_broadcast_retention_keeps_them_longer_and_a_deleted_service_has_the_defaults(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    patient = factories.owner()
    patient.retention = {"broadcast": {"personal_data_days": 30}, "transactional": {"personal_data_days": 2}}
    patient.save()
    kept = _schedule(10)
    other, _ = service_create(name="other")
    gone_short = _schedule(10, client=other)
    gone, _ = service_create(name="gone")
    orphan = _schedule(8, client=gone)
    orphan_young = _schedule(5, client=gone)
    gone.delete()  # its schedules stay, owner column NULL
    _expire()
    assert [_scrubbed(s) for s in (kept, gone_short, orphan, orphan_young)] == [False, True, True, False]
    _expire("--as-of", (timezone.now() + timedelta(days=21)).isoformat())
    assert _scrubbed(kept) and _scrubbed(orphan_young)


def test_a_dry_run_counts_then_the_run_removes_that_in_batches_and_a_second_run_finds_nothing(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    due = [_schedule(8 + i) for i in range(3)]
    young = _schedule(6)
    assert "0 campaign audiences, 3 schedule definitions (as of" in _expire("--dry-run")
    assert not any(_scrubbed(s) for s in [*due, young])
    assert "3 schedule definitions" in _expire("--batch-size", "1")
    assert [_scrubbed(s) for s in [*due, young]] == [True, True, True, False]
    stamps = dict(Schedule.objects.values_list("pk", "personal_data_removed_at"))
    assert "0 schedule definitions" in _expire("--dry-run")
    assert "0 schedule definitions" in _expire()
    assert dict(Schedule.objects.values_list("pk", "personal_data_removed_at")) == stamps  # not rewritten


def test_a_step_out_of_time_removes_nothing(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    due = _schedule(8)
    run = ExpireRun(as_of=timezone.now(), batch_size=10, dry_run=False, policies=retention_policies(),
                    deadline=0.0)
    assert schedule_definitions_personal_data_step(run) == {"schedule_definitions": 0}
    assert not _scrubbed(due)


def test_the_pick_reads_the_partial_index_of_due_schedules():
    """5,000 cancelled inline schedules, all but one already scrubbed, and as many active ones:
    the pick reads schedule_personal_due_idx, not the table."""
    from clients.personal_data import stream_cutoffs
    from scheduling import personal_data

    seed = _schedule(30)
    table = Schedule._meta.db_table
    columns = [f.column for f in Schedule._meta.concrete_fields if f.column != "id"]
    override = {"personal_data_removed_at": "now()",
                "status": "CASE WHEN g %% 2 = 0 THEN status ELSE 'active' END"}
    listed = ", ".join(columns)
    copied = ", ".join(override.get(column, column) for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({listed}) SELECT {copied} FROM {table}, "
                       f"generate_series(1, 10000) g WHERE id = %s", [seed.pk])
        cursor.execute(f"ANALYZE {table}")
        run = ExpireRun(as_of=timezone.now(), batch_size=100, dry_run=False, policies=retention_policies())
        cursor.execute(f"EXPLAIN {personal_data._PICK}", [*stream_cutoffs(run, personal_data.STREAM), 100])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "schedule_personal_due_idx" in plan and "Seq Scan on scheduling_schedule" not in plan, plan
