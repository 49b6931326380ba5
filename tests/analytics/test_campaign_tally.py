"""The campaigns' minute tally of ESP events (decision 125): written by each processed batch
(once: a retry adds nothing), equal to what the campaign's events and marks give, rebuilt from
them by the migration's backfill and by recount_campaign, and the only source of the campaign
statistics' series and per-provider event counts: the stats never read an event or a mark."""

from __future__ import annotations

import importlib
import re
from collections import Counter
from datetime import datetime, timedelta

import psycopg2
import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext

from analytics.selectors.campaign_stats import campaign_row_counts, campaign_stats
from campaigns.models import Campaign
from delivery.models import EmailMessage
from feedback.models import CampaignEventMinute, EmailEvent, MessageEventMark
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from feedback.services.tally import COUNTS_LOCK_NAMESPACE, campaign_tally_rebuild
from tests.feedback.helpers import T0, campaign, event, sent_messages
from tests.plans import statements_of

pytestmark = pytest.mark.django_db
MESSAGES = EmailMessage._meta.db_table
EVENTS = EmailEvent._meta.db_table
MARKS = MessageEventMark._meta.db_table
SINCE = T0 + timedelta(minutes=30, seconds=17)  # inside a minute: the series counts it whole


def stored_tally() -> dict[tuple, tuple[int, int]]:
    rows = CampaignEventMinute.objects.values_list("campaign_id", "minute", "provider", "kind", "events",
                                                   "firsts")
    return {tuple(row[:4]): (row[4], row[5]) for row in rows}


def tally_from_rows() -> dict[tuple, tuple[int, int]]:
    """What the tally should hold, straight from the events and marks of campaign messages."""
    sql = (
        f"SELECT campaign_id, minute, provider, kind, sum(events)::int, sum(firsts)::int FROM ("
        f"  SELECT m.campaign_id, date_trunc('minute', e.occurred_at, 'UTC') AS minute, m.provider, "
        f"         e.event_type AS kind, 1 AS events, 0 AS firsts "
        f"  FROM {EVENTS} e JOIN {MESSAGES} m ON m.id = e.message_id WHERE m.campaign_id IS NOT NULL "
        f"  UNION ALL "
        f"  SELECT m.campaign_id, date_trunc('minute', k.first_at, 'UTC'), m.provider, k.event_type, 0, 1 "
        f"  FROM {MARKS} k JOIN {MESSAGES} m ON m.id = k.message_id WHERE m.campaign_id IS NOT NULL"
        f") rows GROUP BY 1, 2, 3, 4"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return {tuple(row[:4]): (row[4], row[5]) for row in cursor.fetchall()}


def series_from_rows(campaign_id: int, unit: str, since: datetime | None) -> list[dict]:
    """The series as the old row queries counted it: sends and every event of the campaign's
    messages per UTC minute or hour, from the minute of `since`."""
    sql = (
        f"SELECT date_trunc(%s, sent_at, 'UTC'), 'sent', count(*) FROM {MESSAGES} "
        f"WHERE campaign_id = %s AND sent_at >= date_trunc('minute', %s::timestamptz, 'UTC') GROUP BY 1 "
        f"UNION ALL "
        f"SELECT date_trunc(%s, e.occurred_at, 'UTC'), e.event_type, count(*) "
        f"FROM {EVENTS} e JOIN {MESSAGES} m ON m.id = e.message_id "
        f"WHERE m.campaign_id = %s AND e.occurred_at >= date_trunc('minute', %s::timestamptz, 'UTC') "
        f"GROUP BY 1, 2"
    )
    floor = since or datetime(1970, 1, 1, tzinfo=T0.tzinfo)
    points: dict[datetime, dict[str, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [unit, campaign_id, floor, unit, campaign_id, floor])
        for at, kind, n in cursor.fetchall():
            points.setdefault(at, {})[kind] = n
    return [{"t": at.isoformat(), **values} for at, values in sorted(points.items())]


def providers_from_rows(campaign_id: int) -> dict[str, dict[str, int]]:
    """Per provider as the old row queries counted it: sent messages, then marks per kind."""
    providers: dict[str, dict[str, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT provider, count(*) FROM {MESSAGES} WHERE campaign_id = %s "
                       f"AND sent_at IS NOT NULL GROUP BY 1", [campaign_id])
        for provider, n in cursor.fetchall():
            providers[provider or "unknown"] = {"sent": n}
        cursor.execute(f"SELECT m.provider, k.event_type, count(*) FROM {MARKS} k "
                       f"JOIN {MESSAGES} m ON m.id = k.message_id WHERE m.campaign_id = %s GROUP BY 1, 2",
                       [campaign_id])
        for provider, kind, n in cursor.fetchall():
            providers.setdefault(provider or "unknown", {"sent": 0})[kind] = n
    return providers


def messages_of_three_providers(c: Campaign) -> list[EmailMessage]:
    """12 sent messages of `c` (6 sendgrid, 4 mailgun, 2 of no provider), sent 7 minutes apart
    from T0 - 5 min (over two hours), and one still queued."""
    rows = sent_messages(12, campaign_obj=c)
    for position, message in enumerate(rows):
        provider = "sendgrid" if position < 6 else "mailgun" if position < 10 else ""
        sent_at = T0 + timedelta(minutes=7 * position - 5, seconds=position)
        EmailMessage.objects.filter(pk=message.pk).update(provider=provider, sent_at=sent_at)
        message.provider, message.sent_at = provider, sent_at
    sent_messages(1, campaign_obj=c, status="QUEUED")
    EmailMessage.objects.filter(campaign=c, status="QUEUED").update(sent_at=None)
    return rows


def first_batch(m: list[EmailMessage]) -> list:
    batch = [event(x, E.DELIVERED, seconds=5 * i) for i, x in enumerate(m[:9])]
    batch += [event(x, E.OPENED, seconds=90) for x in m[:4]]
    batch += [event(m[0], E.OPENED, seconds=95), event(m[0], E.OPENED, at=T0 + timedelta(minutes=65))]
    batch += [event(m[6], E.OPENED, at=T0 + timedelta(minutes=31))]  # a mailgun open: delivered too
    batch += [event(m[1], E.CLICKED, at=T0 + timedelta(minutes=30, seconds=5))]  # before SINCE, same minute
    batch += [event(m[9], E.BOUNCED, bounce="hard"), event(m[10], E.BOUNCED, bounce="soft", seconds=40)]
    batch += [event(m[11], E.DROPPED, seconds=41), event(m[2], E.COMPLAINED, at=T0 + timedelta(hours=1))]
    batch += [event(m[3], E.UNSUBSCRIBED, at=T0 + timedelta(hours=1, minutes=2))]
    return batch


def other_mail() -> None:
    """Another campaign's events and a transactional message's: in no figure of the first."""
    other = sent_messages(2, campaign_obj=campaign())
    one_off = sent_messages(1)
    events_process(events=[event(x, E.DELIVERED) for x in other + one_off] + [event(None, E.OPENED)])


def test_a_batch_adds_its_stored_events_once_and_a_repeat_adds_nothing():
    c = campaign()
    m = messages_of_three_providers(c)
    other_mail()
    batch = first_batch(m)
    events_process(events=batch)
    minute = T0.replace(second=0)
    tally = stored_tally()
    assert tally[(c.id, minute, "sendgrid", "delivered")] == (6, 6)
    assert tally[(c.id, minute + timedelta(minutes=1), "sendgrid", "opened")] == (5, 4)  # 5 opens, 4 opened
    assert tally[(c.id, minute + timedelta(minutes=31), "mailgun", "opened")] == (1, 1)
    assert tally[(c.id, minute, "mailgun", "bounced")] == (1, 1)  # a hard bounce: an event and a first
    assert tally[(c.id, minute, "", "bounced")] == (1, 0)  # a soft bounce: a "bounced" event ...
    assert tally[(c.id, minute, "", "soft_bounced")] == (0, 1)  # ... and a first soft bounce
    assert tally[(c.id, minute, "", "dropped")] == (1, 1)
    assert tally == tally_from_rows()

    events_process(events=batch)  # the ESP sends the batch again: nothing stored, nothing added
    events_process(events=[*batch[:5], event(m[4], E.OPENED, seconds=90)])  # a retry and one new open
    assert stored_tally() == tally_from_rows()
    assert stored_tally()[(c.id, minute + timedelta(minutes=1), "sendgrid", "opened")] == (6, 5)
    assert sum(e for e, _ in stored_tally().values()) == EmailEvent.objects.filter(
        message__campaign__isnull=False).count()

    Campaign.objects.filter(pk=c.pk).delete()  # the tally goes with its campaign, as its counter
    assert not CampaignEventMinute.objects.filter(campaign_id=c.id).exists()


@pytest.mark.parametrize(("interval", "since"), [("minute", None), ("hour", None), ("minute", SINCE),
                                                 ("hour", SINCE)])
def test_the_stats_series_and_providers_are_what_the_rows_give(interval, since):
    c = campaign()
    m = messages_of_three_providers(c)
    other_mail()
    events_process(events=first_batch(m))
    # A later batch: an open reported late but dated before the first one (the mark moves
    # earlier), repeats, and new events of the second hour.
    hour = T0 + timedelta(hours=1)
    events_process(events=[event(m[2], E.OPENED, seconds=20), event(m[5], E.CLICKED, at=hour),
                           event(m[5], E.CLICKED, at=hour, seconds=3)])
    stats = campaign_stats(campaign=c, interval=interval, since=since)
    assert stats["series"]["points"] == series_from_rows(c.id, interval, since)
    assert stats["providers"] == providers_from_rows(c.id)
    assert stats["providers"]["unknown"] == {"sent": 2, "soft_bounced": 1, "dropped": 1}
    assert stats["counts"]["sent"] == 12
    if since is not None:  # SINCE's minute counts whole: its click and send before SINCE too
        first = stats["series"]["points"][0]
        assert first["t"] == (T0 + timedelta(minutes=30) if interval == "minute" else T0).isoformat()
        assert first["clicked"] == 1 and first["sent"] == (1 if interval == "minute" else 5)


def test_the_backfill_rebuilds_the_tally_live_ingestion_wrote():
    backfill = importlib.import_module("feedback.migrations.0010_campaign_event_minute_backfill").backfill
    c = campaign()
    m = messages_of_three_providers(c)
    other_mail()
    events_process(events=first_batch(m))
    live = stored_tally()
    CampaignEventMinute.objects.all().delete()
    backfill(apps, None)
    assert stored_tally() == live

    # A mark moved earlier by a later batch stays counted at the minute it was first recorded
    # live, at its new time when rebuilt: only the minutes of that first differ, never a sum.
    events_process(events=[event(m[2], E.OPENED, seconds=20)])
    live = stored_tally()
    CampaignEventMinute.objects.all().delete()
    backfill(apps, None)
    rebuilt = stored_tally()
    assert {k: v[0] for k, v in rebuilt.items()} == {k: v[0] for k, v in live.items()}
    moved = {k: (live.get(k, (0, 0))[1], rebuilt.get(k, (0, 0))[1]) for k in live.keys() | rebuilt.keys()
             if live.get(k, (0, 0))[1] != rebuilt.get(k, (0, 0))[1]}
    minute = T0.replace(second=0)
    assert moved == {(c.id, minute + timedelta(minutes=1), "sendgrid", "opened"): (4, 3),
                     (c.id, minute, "sendgrid", "opened"): (0, 1)}
    sums: dict[str, Counter] = {"live": Counter(), "rebuilt": Counter()}
    for name, tally in (("live", live), ("rebuilt", rebuilt)):
        for (campaign_id, _, provider, kind), (_, firsts) in tally.items():
            sums[name][(campaign_id, provider, kind)] += firsts
    assert sums["live"] == sums["rebuilt"]


def test_recount_rebuilds_a_corrupted_tally(capsys):
    c = campaign()
    m = messages_of_three_providers(c)
    events_process(events=first_batch(m))
    expected = tally_from_rows()
    CampaignEventMinute.objects.filter(campaign_id=c.id, kind="delivered").update(events=99)
    CampaignEventMinute.objects.filter(campaign_id=c.id, kind="opened").delete()
    CampaignEventMinute.objects.create(campaign_id=c.id, minute=T0, provider="ses", kind="opened", events=7)
    call_command("recount_campaign", c.id, "--dry-run")
    assert stored_tally() != expected
    assert "would be" in capsys.readouterr().out
    call_command("recount_campaign", c.id)
    assert stored_tally() == expected
    out = capsys.readouterr().out
    rows = len(expected)
    assert f"tally {rows} rows, {sum(e for e, _ in expected.values())} events" in out


def test_a_rebuild_waits_for_a_batch_counting_the_campaign():
    """The counts lock: held shared by a batch (here another session), exclusive by a rebuild."""
    c = campaign()
    batch = psycopg2.connect(**connection.get_connection_params())
    try:
        batch.cursor().execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [COUNTS_LOCK_NAMESPACE, c.id])
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '200ms'")
            campaign_tally_rebuild(c.id)
        batch.rollback()  # the batch ends: the rebuild goes through
    finally:
        batch.close()
    assert campaign_tally_rebuild(c.id) == 0


@pytest.mark.parametrize(("interval", "since"), [("minute", None), ("hour", SINCE)])
def test_the_stats_read_no_event_nor_mark_and_the_messages_once(interval, since):
    c = campaign()
    m = messages_of_three_providers(c)
    events_process(events=first_batch(m))
    with connection.cursor() as cursor:
        # Other campaigns' tally rows around it, analysed: the stats read the campaign's range.
        cursor.execute(f"INSERT INTO {CampaignEventMinute._meta.db_table} "
                       f"(campaign_id, minute, provider, kind, events, firsts) "
                       f"SELECT {c.id} + 1 + g / 3000, %s::timestamptz + (g %% 3000) * interval '1 minute', "
                       f"'sendgrid', 'opened', 1, 1 FROM generate_series(0, 29999) g", [T0])
        cursor.execute(f"ANALYZE {CampaignEventMinute._meta.db_table}")
    statements = statements_of(lambda: campaign_stats(campaign=c, interval=interval, since=since))
    plans = []
    with connection.cursor() as cursor:
        for sql, params in statements:
            if sql.startswith("SET LOCAL "):  # the planner settings of the messages' read
                cursor.execute(sql, params)
                continue
            if sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT")):
                continue
            assert sql.lstrip().upper().startswith(("SELECT", "WITH")), sql  # reads only
            cursor.execute(f"EXPLAIN {sql}", params)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    assert not [p for p in plans if EVENTS in p or MARKS in p], plans
    assert len([p for p in plans if MESSAGES in p]) == 1, plans  # once, grouped
    tally_plans = [p for p in plans if CampaignEventMinute._meta.db_table in p]
    assert len(tally_plans) == 2, plans
    assert all("_pkey" in p and "Seq Scan" not in p for p in tally_plans), tally_plans


def test_the_messages_are_read_through_the_campaign_index_whatever_the_statistics_say():
    """A campaign of a fifth of its week's rows, analysed: the planner's own choice is a scan of
    the whole partition (its estimate spreads the campaign over every page); the stats read the
    campaign's pages through its index (CAMPAIGN_ROWS_PLAN)."""
    c = campaign()
    sent_messages(4000, campaign_obj=c)
    others = campaign()
    sent_messages(16000, campaign_obj=others)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {MESSAGES}")
    statements = statements_of(lambda: campaign_row_counts(campaign=c))
    read = next((sql, params) for sql, params in statements if sql.startswith("SELECT"))
    settings = [sql for sql, _ in statements if sql.startswith("SET LOCAL ") and "DEFAULT" not in sql]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {read[0]}", read[1])
        default_plan = "\n".join(row[0] for row in cursor.fetchall())
        for sql in settings:
            cursor.execute(sql)
        cursor.execute(f"EXPLAIN {read[0]}", read[1])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan on delivery_emailmessage_" in default_plan, default_plan  # the data is telling
    # A bitmap of the campaign index, or its index-only scan if autovacuum passed meanwhile.
    assert re.search(r"(Bitmap Index Scan on|Index Only Scan using) msg_campaign_cover_idx_", plan), plan
    assert "Parallel" not in plan, plan
    busy = [line for line in plan.splitlines() if "Seq Scan on delivery_emailmessage_" in line
            and "rows=1 " not in line]  # an empty partition's one-page guess is no scan of rows
    assert busy == [], plan
    assert campaign_row_counts(campaign=c).sent == 4000


def _analysed_plan_of_the_messages_read(c: Campaign) -> str:
    """EXPLAIN ANALYZE of campaign_row_counts' read, under its own planner settings."""
    statements = statements_of(lambda: campaign_row_counts(campaign=c))
    read = next((sql, params) for sql, params in statements if sql.startswith("SELECT"))
    settings = [sql for sql, _ in statements if sql.startswith("SET LOCAL ") and "DEFAULT" not in sql]
    with transaction.atomic(), connection.cursor() as cursor:
        for sql in settings:
            cursor.execute(sql)
        cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {read[0]}", read[1])
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction
def test_a_vacuumed_campaign_is_counted_from_the_covering_index_alone():
    """Decision 134: a settled campaign's week, vacuumed (all visible), is read by an index-only
    scan of msg_campaign_cover_idx (it includes provider and sent_at): no heap fetch."""
    c = campaign(status=Campaign.Status.COMPLETED)
    sent_messages(3000, campaign_obj=c)
    sent_messages(1000, campaign_obj=c, status="DELIVERED")
    sent_messages(12000, campaign_obj=campaign())  # the week's other mail
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {MESSAGES}")
    plan = _analysed_plan_of_the_messages_read(c)
    # An empty week's scan (PostgreSQL 18 prints "rows=0.00", 15 "rows=0") reads nothing.
    scans = [line for line in plan.splitlines() if "Scan" in line and not re.search(r"rows=0(\.0+)? ", line)]
    assert len(scans) == 1 and "Index Only Scan using msg_campaign_cover_idx_" in scans[0], plan
    fetches = re.findall(r"Heap Fetches: (\d+)", plan)
    assert fetches and set(fetches) == {"0"}, plan
    assert "Bitmap" not in plan, plan
    counts = campaign_row_counts(campaign=c)
    assert counts.by_status == {"SENT": 3000, "DELIVERED": 1000}
    assert counts.sent_by_provider == {"sendgrid": 4000}


def test_a_send_counts_in_its_utc_minute_to_the_microsecond():
    """The sends' minutes (UtcMinute: date_bin from the epoch) are the UTC minutes the events'
    tally uses: a send a microsecond before a minute is in the one before, one at :00 in its own."""
    c = campaign()
    sent = [T0 - timedelta(microseconds=1), T0, T0 + timedelta(seconds=59, microseconds=999_999),
            T0 + timedelta(minutes=1)]
    for message, at in zip(sent_messages(len(sent), campaign_obj=c), sent, strict=True):
        EmailMessage.objects.filter(pk=message.pk).update(sent_at=at)
    points = campaign_stats(campaign=c)["series"]["points"]
    minute = timedelta(minutes=1)
    assert points == [{"t": (T0 - minute).isoformat(), "sent": 1}, {"t": T0.isoformat(), "sent": 2},
                      {"t": (T0 + minute).isoformat(), "sent": 1}]
    assert points == series_from_rows(c.id, "minute", None)
    hourly = campaign_stats(campaign=c, interval="hour")["series"]["points"]
    assert hourly == [{"t": (T0 - timedelta(hours=1)).isoformat(), "sent": 1},
                      {"t": T0.isoformat(), "sent": 3}]


def test_the_stats_api_reads_each_table_once_whatever_the_providers(api):
    """The answer's reads, over the API: the campaign with its service, its messages once, its
    counter, its tally twice (providers, series), its unsubscribes; none per provider or point."""
    c = campaign()
    events_process(events=first_batch(messages_of_three_providers(c)))
    url = f"/api/v1/campaigns/{c.id}/stats"
    assert api.get(url).status_code == 200  # the key verified and its use recorded
    with CaptureQueriesContext(connection) as captured:
        response = api.get(url)
    assert response.status_code == 200
    assert len(response.json()["providers"]) == 3 and len(response.json()["series"]["points"]) > 10
    reads = [q["sql"] for q in captured.captured_queries
             if q["sql"].lstrip().startswith("SELECT") and '"clients_apikey"' not in q["sql"]]
    tables = Counter(re.search(r'\bFROM "(\w+)"', sql).group(1) for sql in reads)
    assert tables == {"campaigns_campaign": 1, MESSAGES: 1, "feedback_campaigneventcounter": 1,
                      CampaignEventMinute._meta.db_table: 2, "audience_consentchange": 1}, reads
    assert '"clients_service"' in next(sql for sql in reads if 'FROM "campaigns_campaign"' in sql)
