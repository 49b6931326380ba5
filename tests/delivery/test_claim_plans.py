"""Statements that name their rows by id are driven by the primary key, whatever the statistics
of `status` say (decision 67): a campaign makes rows QUEUED faster than autoanalyze notices. The
recovery sweeps, which look for a state's few live rows, walk the status index with a plain index
scan, which marks the dead entries a campaign leaves there (decision 68)."""

import re

import pytest
from django.db import connection, transaction
from django.utils import timezone

from delivery.models import EmailMessage
from delivery.services import ledger, sending
from tests.factories import email_message, template_version
from tests.plans import plan_sorts, statements_of

pytestmark = pytest.mark.django_db
TABLE = EmailMessage._meta.db_table
STATUS_INDEX = "msg_status_claimed_idx"
# The fixtures' 5,000 rows are read faster whole; on the millions of rows these plans are about,
# a sequential scan is never the choice. Without it, the planner picks between the indexes.
NOT_A_SMALL_TABLE = "SET LOCAL enable_seqscan TO OFF"


def _rows_behind_stale_statistics(status: str, analyzed_as: str = "SENT") -> list[int]:
    """5,000 rows analyzed while `analyzed_as` (SENT: the steady state), then moved to `status`,
    as a campaign does: 500 of their ids."""
    template = email_message(version=template_version())
    columns = [f.column for f in EmailMessage._meta.concrete_fields if f.column != "id"]
    listed = ", ".join(columns)
    copied = listed.replace("idempotency_key", "idempotency_key || g")  # unique per copy
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} ({listed}) SELECT {copied} "
            f"FROM {TABLE}, generate_series(1, 5000) g WHERE id = %s",
            [template.id],
        )
        cursor.execute(f"UPDATE {TABLE} SET status = %s, claimed_at = now() - interval '1 h'", [analyzed_as])
        cursor.execute(f"ANALYZE {TABLE}")
        cursor.execute(f"UPDATE {TABLE} SET status = %s, claim_token = 'plan-check' RETURNING id", [status])
        return sorted(row[0] for row in cursor.fetchall())[:500]


@pytest.fixture
def queued_ids_behind_stale_statistics() -> list[int]:
    return _rows_behind_stale_statistics("QUEUED")


@pytest.fixture
def claimed_ids_behind_stale_statistics() -> list[int]:
    return _rows_behind_stale_statistics("SENDING")


@pytest.fixture
def sent_rows_analyzed_while_claimed() -> None:
    """A campaign's batches, analyzed mid-flight (SENDING), then sent: the status index holds
    5,000 dead SENDING entries and the statistics still expect thousands of live ones."""
    _rows_behind_stale_statistics("SENT", analyzed_as="SENDING")


def _plans_of(call) -> list[str]:
    """EXPLAIN of every statement `call` runs (captured as it runs, then explained)."""
    statements = statements_of(call)
    plans = []
    with connection.cursor() as cursor:
        cursor.execute(NOT_A_SMALL_TABLE)
        for sql, params in statements:
            if sql.lstrip().upper().startswith(("UPDATE", "SELECT", "WITH")):
                cursor.execute(f"EXPLAIN {sql}", params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans


def _plans_without_and_with_settings(call, keyword: str, *setup: str) -> tuple[str, str, str]:
    """The one `keyword` statement `call` runs and the planner settings given before it in the
    same query string: (the settings, its plan without them, its plan with them)."""
    statements = [(sql, params) for sql, params in statements_of(call) if keyword in sql]
    assert len(statements) == 1, statements
    settings, _, statement = statements[0][0].rpartition("; ")
    plans = []
    with transaction.atomic(), connection.cursor() as cursor:
        for step in setup:
            cursor.execute(step)
        for given in ("", settings):
            if given:
                cursor.execute(given)
            cursor.execute(f"EXPLAIN {statement}", statements[0][1])
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return settings, plans[0], plans[1]


@pytest.mark.parametrize("claim", ["messages_claim", "messages_claim_hand_off", "messages_claim_for_send"])
def test_a_batch_claim_walks_its_own_ids_not_every_queued_row(claim, queued_ids_behind_stale_statistics):
    ids = queued_ids_behind_stale_statistics
    _assert_driven_by_ids(_plans_of(lambda: getattr(ledger, claim)(message_ids=ids, token="plan-check")))


def _assert_driven_by_ids(plans: list[str]) -> None:
    assert plans, "no statement ran"
    for plan in plans:
        assert STATUS_INDEX not in plan, plan
        assert "_pkey" in plan, plan


@pytest.mark.parametrize("change", [
    lambda ids: ledger.messages_mark_sent(provider_ids={i: f"esp-{i}" for i in ids}, provider="smtp",
                                          token="plan-check"),
    lambda ids: ledger.messages_mark_final(message_ids=ids, token="plan-check", status="FAILED", error="x"),
    lambda ids: ledger.messages_release(message_ids=ids, token="plan-check"),
    lambda ids: sending._redelivered(ids, "plan-check"),
    lambda ids: sending._split(ids, "plan-check"),
], ids=["mark_sent", "mark_final", "release", "redelivered", "split"])
def test_a_batch_write_on_claimed_rows_walks_its_own_ids(change, claimed_ids_behind_stale_statistics):
    _assert_driven_by_ids(_plans_of(lambda: change(claimed_ids_behind_stale_statistics)))


SWEEPS = {
    "stale_claims_release": lambda: ledger.stale_claims_release(claimed_before=timezone.now()),
    "stalled_sends_mark_ambiguous": lambda: ledger.stalled_sends_mark_ambiguous(
        started_before=timezone.now()),
}


@pytest.mark.django_db(transaction=True)  # the hint is only given to autocommit statements
@pytest.mark.parametrize("sweep", SWEEPS, ids=list(SWEEPS))
def test_a_recovery_sweep_walks_the_status_index_without_a_bitmap(sweep, sent_rows_analyzed_while_claimed):
    hint, unhinted, hinted = _plans_without_and_with_settings(SWEEPS[sweep], "UPDATE", NOT_A_SMALL_TABLE)
    assert hint == "SET LOCAL enable_bitmapscan TO OFF"
    assert "Bitmap" in unhinted, unhinted  # the planner's own choice here: the hint matters
    assert "Bitmap" not in hinted and f"Index Scan using {STATUS_INDEX}" in hinted, hinted


@pytest.fixture
def campaign_rows_behind_stale_statistics() -> int:
    """5,000 rows of one campaign (contact ids = row ids) analyzed while SENT, then QUEUED again:
    a campaign whose tasks a broker restart lost. Its id."""
    from campaigns.models import Campaign

    campaign = Campaign.objects.create(name="plan", template_version=template_version(),
                                       status=Campaign.Status.SENDING, audience={"type": "inline"})
    _rows_behind_stale_statistics("SENT")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET campaign_id = %s, contact_id = id", [campaign.pk])
        cursor.execute(f"ANALYZE {TABLE}")
        cursor.execute(f"UPDATE {TABLE} SET status = 'QUEUED', claim_token = ''")
    return campaign.pk


@pytest.mark.django_db(transaction=True)  # the planner settings are only given to autocommit statements
@pytest.mark.parametrize(("order", "index"), [("id", rf"{TABLE}_\d{{8}}_pkey"),
                                              ("contact_id", r"msg_contact_idx_\d{8}")])
def test_a_campaign_republish_page_walks_its_order_index_and_stops(order, index,
                                                                   campaign_rows_behind_stale_statistics):
    """Decision 77: the planner's own plan reads every QUEUED row of the campaign and sorts them
    for each page (quadratic over a re-publish of 700,000 rows); the page walks one index."""
    page = lambda: ledger.campaign_queued_page(  # noqa: E731
        campaign_id=campaign_rows_behind_stale_statistics, order=order, after=0, upper=None, limit=100)
    _, unhinted, hinted = _plans_without_and_with_settings(page, "SELECT")
    assert plan_sorts(unhinted), unhinted  # the planner's own choice here: the settings matter
    # Each day partition's index, merged in order (Merge Append): no sort, no parallel scan.
    assert not plan_sorts(hinted) and "Gather" not in hinted, hinted
    assert re.search(f"Index Scan using {index}", hinted), hinted
    assert len(page()) == 100


def test_campaign_pages_cover_every_queued_row_once_within_bounds(campaign_rows_behind_stale_statistics):
    campaign_id = campaign_rows_behind_stale_statistics
    with connection.cursor() as cursor:  # some rows already sent: pages skip them
        cursor.execute(f"UPDATE {TABLE} SET status = 'SENT' WHERE mod(id, 3) = 0")
        cursor.execute(f"SELECT id FROM {TABLE} WHERE status = 'QUEUED' ORDER BY id")
        queued = [row[0] for row in cursor.fetchall()]
    seen, after = [], 0
    while page := ledger.campaign_queued_page(campaign_id=campaign_id, order="id", after=after,
                                              upper=None, limit=333):
        seen += [pk for pk, _ in page]
        after = page[-1][1]
    assert seen == queued
    upper = queued[100]
    window = ledger.campaign_queued_page(campaign_id=campaign_id, order="contact_id", after=queued[9],
                                         upper=upper, limit=1000)
    assert [pk for pk, _ in window] == queued[10:101]
    assert ledger.campaign_queued_page(campaign_id=campaign_id + 1, order="id", after=0, upper=None,
                                       limit=10) == []
    with pytest.raises(ValueError, match="order"):
        ledger.campaign_queued_page(campaign_id=campaign_id, order="status", after=0, upper=None, limit=1)


ORPHAN_SWEEPS = {
    "orphaned_messages_claim_requeue": lambda: ledger.orphaned_messages_claim_requeue(
        older_than=timezone.now()),
    "queued_transactional_requeue": lambda: ledger.queued_transactional_requeue(
        published_before=timezone.now()),
}


@pytest.mark.django_db(transaction=True)  # the hint is only given to autocommit statements
@pytest.mark.parametrize("sweep", ORPHAN_SWEEPS, ids=list(ORPHAN_SWEEPS))
def test_an_orphan_sweep_reads_only_transactional_queued_rows(sweep, campaign_rows_behind_stale_statistics):
    """Decision 119: with a campaign's rows QUEUED (a fan-out) and statistics from before it, the
    sweeps for lost transactional tasks walked the status index through every one of them (771
    ms per tick at 700,000 rows). They test the status unindexed: the status index is out of
    reach, and the tick's sweep reads its partial index, which holds only the rows it wants.
    (The once-after-a-broker-loss sweep may take the campaign index's NULL prefix instead, here
    where the statistics say no row is transactional; either way no campaign row is read.)"""
    lost = [email_message(version=template_version()).pk for _ in range(3)]
    requeued: list[tuple[int, int]] = []
    run = lambda: requeued.extend(ORPHAN_SWEEPS[sweep]())  # noqa: E731
    _, _, plan = _plans_without_and_with_settings(run, "UPDATE", NOT_A_SMALL_TABLE)
    assert STATUS_INDEX not in plan, plan
    if sweep == "orphaned_messages_claim_requeue":  # every tick: it reads only its own rows
        assert "Index Scan using msg_queued_txn_idx" in plan, plan
    # Never a campaign row: the campaign sweeps own those.
    assert sorted(pk for pk, _ in requeued) == sorted(lost)


def _older_weeks_with_rows(weeks: int) -> set[str]:
    """Partitions of `weeks` earlier weeks, a row moved into each: the partitions a statement by
    id must not read. Their names."""
    from core.partitions.create import days_ensure
    from core.partitions.spec import day_floor, day_number, partition_name, span_start
    from delivery.partitioning import MESSAGES

    today = day_number(timezone.now())
    starts = [span_start(today - 7 * back) for back in range(1, weeks + 1)]
    version = template_version()
    with connection.cursor() as cursor:
        days_ensure(cursor, MESSAGES, starts)
        for start in starts:
            row = email_message(version=version)
            cursor.execute(f"UPDATE {TABLE} SET id = %s WHERE id = %s", [day_floor(start) + 1, row.pk])
    return {partition_name(TABLE, start) for start in starts}


@pytest.mark.parametrize("claim", ["messages_claim", "messages_claim_hand_off", "messages_claim_for_send"])
def test_a_claim_reads_only_the_partition_of_its_ids(claim, queued_ids_behind_stale_statistics):
    """Decision 122: the ids carry their day, so a statement by id is pruned to its partition at
    plan time, however many weeks of history the table holds."""
    older = _older_weeks_with_rows(4)
    plans = _plans_of(lambda: getattr(ledger, claim)(message_ids=queued_ids_behind_stale_statistics,
                                                     token="plan-check"))
    for plan in plans:
        read = set(re.findall(rf"{TABLE}_\d{{8}}", plan))
        assert len(read) == 1 and not read & older, plan


def test_campaign_counts_by_status_read_its_index_in_every_partition(campaign_rows_behind_stale_statistics):
    """The statistics' GROUP BY status of one campaign (campaign_status_counts) reads the
    campaign index of each partition, never a partition whole."""
    from campaigns.selectors import campaign_status_counts
    from core.partitions.spec import day_number, partition_name, span_start

    _older_weeks_with_rows(2)
    other = email_message(version=template_version())
    columns = ", ".join(f.column for f in EmailMessage._meta.concrete_fields if f.column != "id")
    copied = columns.replace("idempotency_key", "idempotency_key || g")
    with connection.cursor() as cursor:  # the week's other mail: the campaign is a part of it
        cursor.execute(f"INSERT INTO {TABLE} ({columns}) SELECT {copied} "
                       f"FROM {TABLE}, generate_series(1, 20000) g WHERE id = %s", [other.pk])
        cursor.execute(f"ANALYZE {TABLE}")
    plans = _plans_of(lambda: campaign_status_counts(campaign_id=campaign_rows_behind_stale_statistics))
    assert len(plans) == 1
    assert "Seq Scan" not in plans[0], plans[0]
    # The week holding the campaign reads the campaign index; the empty weeks cost nothing
    # whichever index the planner takes there.
    this_week = partition_name(TABLE, span_start(day_number(timezone.now())))
    assert re.search(rf"Index (Only )?Scan (using|on) msg_campaign_cover_idx_{this_week[len(TABLE) + 1:]}",
                     plans[0]), plans[0]
