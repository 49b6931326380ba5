"""A cancelled schedule's inline addresses are removed from `Schedule.definition` after its
service's broadcast personal-data retention (issue 30, decision 132): the definition keeps its
template, priority and the recipients' type, owner and count; the schedules API, its detail and
the admin answer as before. A schedule that may still fire (active, paused) is never touched;
segment and list recipients and one-off records (no definition) are never rewritten; a row
cancelled before `cancelled_at` existed counts from `updated_at`. What holds for campaign
audiences too (a longer retention, a deleted service, a dry run, a second run, the due index):
test_inline_personal_data.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Schedule
from scheduling.services.recurring import schedule_run
from tests.retention.helpers import ADDRESSES, SCHEDULE_DEFINITIONS, SS, cancelled_schedule, expire
from tests.scheduling.support import clear_schedule_keys

pytestmark = pytest.mark.django_db
_scrubbed = SCHEDULE_DEFINITIONS.scrubbed


@pytest.fixture(autouse=True)
def clean_redis():
    clear_schedule_keys()
    yield
    clear_schedule_keys()


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
    assert "0 schedule definitions" in expire()  # cancelled just now: kept for the retention

    Schedule.objects.filter(pk=schedule_id).update(cancelled_at=timezone.now() - timedelta(days=8))
    assert "1 schedule definitions" in expire()

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
    waiting = [cancelled_schedule(400, status=status) for status in (SS.ACTIVE, SS.PAUSED)]
    cancelled = cancelled_schedule(2)
    legacy = cancelled_schedule(2, legacy=True)  # cancelled before `cancelled_at`: counts from updated_at
    young_legacy = cancelled_schedule(0.5, legacy=True)
    expire()
    assert [_scrubbed(s) for s in [*waiting, cancelled, legacy, young_legacy]] == [False, False, True, True,
                                                                                     False]
    # Cancelled at last: it goes once its own cancellation is past the retention.
    from scheduling.services.recurring import schedule_cancel

    paused = waiting[-1]
    schedule_cancel(schedule=paused)
    expire()
    assert not _scrubbed(paused)
    expire("--as-of", (timezone.now() + timedelta(days=2)).isoformat())
    assert _scrubbed(paused) and not _scrubbed(waiting[0])


def test_references_and_one_off_records_stay_as_they_were(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    segment = cancelled_schedule(30, definition={"template_id": 1,
                                                 "recipients": {"type": "segment", "segment_id": 4}})
    listed = cancelled_schedule(30, definition={"template_id": 1,
                                                "recipients": {"type": "list", "list_id": 3}})
    one_off = cancelled_schedule(30, definition={}, type=Schedule.Type.SCHEDULED)
    assert "0 schedule definitions" in expire()
    for s in (segment, listed, one_off):
        row = Schedule.objects.get(pk=s.pk)
        assert (row.definition, row.personal_data_removed_at) == (s.definition, None)
