"""An ended inline campaign's addresses are removed from `Campaign.audience` after its service's
broadcast personal-data retention (issue 30, decision 130): the audience keeps its type,
owner and count, the campaign its counters, statistics, admin page and API answer. A campaign
that may still fan out (queued, scheduled, sending, paused) is never touched; segment and list
audiences are never rewritten; a service with a longer retention keeps them longer; a deleted
service's campaigns go under the defaults; a dry run counts; a second run finds nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from campaigns.models import Campaign
from campaigns.personal_data import campaign_audiences_personal_data_step
from campaigns.services.fanout import campaign_fanout
from clients.personal_data import ExpireRun, retention_policies
from clients.services import service_create
from delivery.models import EmailMessage
from tests import factories
from tests.feedback.helpers import campaign

pytestmark = pytest.mark.django_db
CS = Campaign.Status
ADDRESSES = ["ada@example.com", "grace@example.com", "edsger@example.com"]


def _inline(client_id: str | None = None) -> dict:
    rows = [{"email": a, "name": a.split("@")[0].title(), "timezone": "Europe/Paris", "data": {"code": a[:3]}}
            for a in ADDRESSES]
    return {"type": "inline", "client_id": client_id or factories.owner().pk, "contacts": rows}


def _ended(days: float, *, status: str = CS.COMPLETED, **fields) -> Campaign:
    """An inline campaign of factories.owner() (unless `client` says) that ended `days` ago."""
    fields.setdefault("audience", _inline(getattr(fields.get("client"), "pk", None)))
    at = timezone.now() - timedelta(days=days)
    made = campaign(status=status, **fields)
    Campaign.objects.filter(pk=made.pk).update(created_at=at - timedelta(hours=1),
                                                completed_at=at if status in (CS.COMPLETED, CS.CANCELLED,
                                                                              CS.FAILED) else None)
    return Campaign.objects.get(pk=made.pk)


def _expire(*args: str) -> str:
    out = StringIO()
    call_command("expire_data", *args, stdout=out)
    return out.getvalue()


def _scrubbed(c: Campaign) -> bool:
    row = Campaign.objects.get(pk=c.pk)
    holds = any(address in json.dumps(row.audience) for address in ADDRESSES)
    assert holds == (row.personal_data_removed_at is None), (row.audience, row.personal_data_removed_at)
    return not holds


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@x.io", "pw-ops-123"))
    return client


def test_an_inline_campaign_loses_its_addresses_after_the_retention_and_keeps_every_figure(
        api, staff_client, settings, purged_queues):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    version = factories.template_version()
    launched = api.post("/api/v1/notifications/email", {
        "template_id": version.template_id, "recipients": {"type": "inline", "contacts": [
            {"email": a, "name": "X", "data": {"plan": "pro"}} for a in ADDRESSES]}}, format="json")
    assert launched.status_code == 202, launched.content
    campaign_id = launched.json()["campaign_id"]
    campaign_fanout(campaign_id=campaign_id)
    EmailMessage.objects.filter(campaign_id=campaign_id).update(status="DELIVERED", sent_at=timezone.now())
    ended = timezone.now() - timedelta(days=8)
    Campaign.objects.filter(pk=campaign_id).update(status=CS.COMPLETED, completed_at=ended)
    detail = api.get(f"/api/v1/campaigns/{campaign_id}").json()
    stats = api.get(f"/api/v1/campaigns/{campaign_id}/stats").json()
    assert detail["counters"]["total"] == 3 and detail["personal_data_removed_at"] is None
    before = Campaign.objects.get(pk=campaign_id)

    assert "1 campaign audiences" in _expire()

    after = Campaign.objects.get(pk=campaign_id)
    assert after.audience == {"type": "inline", "client_id": before.audience["client_id"], "contacts": [],
                              "count": 3}
    assert _scrubbed(after)
    assert (after.status, after.audience_size, after.excluded_count, after.completed_at) == (
        before.status, 3, before.excluded_count, before.completed_at)
    again = api.get(f"/api/v1/campaigns/{campaign_id}")
    assert again.status_code == 200
    body = again.json()
    assert body.pop("personal_data_removed_at") is not None
    detail.pop("personal_data_removed_at")
    assert body == detail
    assert api.get(f"/api/v1/campaigns/{campaign_id}/stats").json() == stats
    listed = api.get("/api/v1/campaigns").json()["results"]
    assert [row["personal_data_removed_at"] is not None for row in listed] == [True]
    page = staff_client.get(f"/admin/campaigns/campaign/{campaign_id}/change/")
    assert page.status_code == 200 and b"inline: 3 contacts (addresses removed" in page.content
    assert not any(a.encode() in page.content for a in ADDRESSES)


def test_a_campaign_that_may_still_fan_out_is_never_touched(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    waiting = [_ended(400, status=status)
               for status in (CS.DRAFT, CS.SCHEDULED, CS.QUEUED, CS.SENDING, CS.PAUSED)]
    ended = [_ended(2, status=status) for status in (CS.COMPLETED, CS.CANCELLED, CS.FAILED)]
    _expire()
    assert [_scrubbed(c) for c in waiting] == [False] * 5
    assert [_scrubbed(c) for c in ended] == [True] * 3
    # Resumed and finished at last: it goes once its own end is past the retention.
    paused = waiting[-1]
    Campaign.objects.filter(pk=paused.pk).update(status=CS.COMPLETED, completed_at=timezone.now())
    _expire()
    assert not _scrubbed(paused)
    _expire("--as-of", (timezone.now() + timedelta(days=2)).isoformat())
    assert _scrubbed(paused)


def test_segment_and_list_audiences_are_references_and_stay_as_they_were(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    owner = factories.owner().pk
    segment = _ended(30, audience={"type": "segment", "segment_id": 4, "client_id": owner,
                                   "definition": {"conditions": [{"attribute": "plan", "op": "equals",
                                                                  "value": "pro"}]}})
    listed = _ended(30, audience={"type": "list", "list_id": 3, "client_id": owner})
    assert "0 campaign audiences" in _expire()
    for c in (segment, listed):
        row = Campaign.objects.get(pk=c.pk)
        assert (row.audience, row.personal_data_removed_at) == (c.audience, None)


def test_a_longer_broadcast_retention_keeps_them_longer_and_a_deleted_service_has_the_defaults(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    patient = factories.owner()
    patient.retention = {"broadcast": {"personal_data_days": 30}, "transactional": {"personal_data_days": 2}}
    patient.save()
    kept = _ended(10)
    other, _ = service_create(name="other")
    gone_short = _ended(10, client=other)
    gone, _ = service_create(name="gone")
    orphan = _ended(8, client=gone)
    orphan_young = _ended(5, client=gone)
    gone.delete()  # its campaigns stay, owner column NULL
    _expire()
    assert [_scrubbed(c) for c in (kept, gone_short, orphan, orphan_young)] == [False, True, True, False]
    _expire("--as-of", (timezone.now() + timedelta(days=21)).isoformat())
    assert _scrubbed(kept) and _scrubbed(orphan_young)


def test_a_dry_run_counts_then_the_run_removes_that_in_batches_and_a_second_run_finds_nothing(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    due = [_ended(8 + i) for i in range(3)]
    young = _ended(6)
    assert "0 webhook bodies, 3 campaign audiences, 0 schedule definitions (as of" in _expire("--dry-run")
    assert not any(_scrubbed(c) for c in [*due, young])
    assert "3 campaign audiences" in _expire("--batch-size", "1")
    assert [_scrubbed(c) for c in [*due, young]] == [True, True, True, False]
    stamps = dict(Campaign.objects.values_list("pk", "personal_data_removed_at"))
    assert "0 campaign audiences" in _expire("--dry-run")
    assert "0 campaign audiences" in _expire()
    assert dict(Campaign.objects.values_list("pk", "personal_data_removed_at")) == stamps  # not rewritten


def test_a_step_out_of_time_removes_nothing(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    due = _ended(8)
    run = ExpireRun(as_of=timezone.now(), batch_size=10, dry_run=False, policies=retention_policies(),
                    deadline=0.0)
    assert campaign_audiences_personal_data_step(run) == {"campaign_audiences": 0}
    assert not _scrubbed(due)


def test_the_pick_reads_the_partial_index_of_due_campaigns():
    """5,000 ended inline campaigns, all but one already scrubbed, and as many segment ones: the
    pick reads campaign_personal_due_idx, not the table."""
    from campaigns import personal_data
    from clients.personal_data import stream_cutoffs

    seed = _ended(30)
    table = Campaign._meta.db_table
    columns = [f.column for f in Campaign._meta.concrete_fields if f.column != "id"]
    # Every other copy a segment campaign, every copy but the seed already scrubbed.
    override = {"personal_data_removed_at": "now()",
                "audience": "CASE WHEN g %% 2 = 0 THEN audience ELSE '{\"type\": \"segment\"}'::jsonb END"}
    listed = ", ".join(columns)
    copied = ", ".join(override.get(column, column) for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({listed}) SELECT {copied} FROM {table}, "
                       f"generate_series(1, 10000) g WHERE id = %s", [seed.pk])
        cursor.execute(f"ANALYZE {table}")
        run = ExpireRun(as_of=timezone.now(), batch_size=100, dry_run=False, policies=retention_policies())
        cursor.execute(f"EXPLAIN {personal_data._PICK}", [*stream_cutoffs(run, personal_data.STREAM), 100])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "campaign_personal_due_idx" in plan and "Seq Scan on campaigns_campaign" not in plan, plan
