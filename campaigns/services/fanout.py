"""Fan-out: turn a campaign's audience into message rows inside PostgreSQL, chunk by chunk.

One statement per chunk of ~1000 contacts walks the audience by contact id (keyset), drops
unsubscribed contacts and suppressed addresses with an anti-join, and INSERTs ... SELECTs the
message rows (idempotency key `c:<campaign>:<contact>`, ON CONFLICT DO NOTHING). The same
transaction advances the campaign's `fanout_cursor`; after the commit the new QUEUED ids are
published as batch tasks on the campaign's priority queue. No recipient passes through the ORM.

Restart safety: a fan-out killed half-way is redelivered (acks_late) or re-run by resume; it
starts from the cursor, and first re-publishes the unclaimed QUEUED rows its publishing had not
reached (campaigns/services/fanout_marks.py), covering a crash between a chunk's commit and its
publish (a second publish is harmless: the claim fences it); a resume re-publishes them all. A
session advisory lock keeps two copies of one campaign's fan-out from running at once.

A big audience (NOTIFIER_FANOUT_PARALLEL_MIN contacts or more) is split into disjoint contact-id
ranges written at once by NOTIFIER_FANOUT_CONNECTIONS threads, each with its own connection and
its own cursor in `Campaign.fanout_ranges` (one INSERT uses one PostgreSQL backend: decision 58).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from threading import Event

from django.conf import settings
from django.db import connection, transaction
from django.db.models import NOT_PROVIDED
from django.utils import timezone

from audience.models import Suppression
from campaigns.audience import (
    CAMPAIGN_TABLE,
    CONTACT_TABLE,
    audience_count,
    audience_sql,
    inline_contacts_upsert,
)
from campaigns.campaign_schedule import campaign_schedule_compiled
from campaigns.jobs import campaign_progress_check_later
from campaigns.models import Campaign
from campaigns.schedule_sql import schedule_expr_params, schedule_sql
from campaigns.services.fanout_marks import fanout_published_mark, fanout_published_marks, range_field
from campaigns.services.scheduled import campaign_schedule_record_update, campaign_scheduled_restore
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from delivery.services.ledger import campaign_queued_page
from scheduling.services import due

logger = logging.getLogger(__name__)
Status = EmailMessage.Status
CHUNK_SIZE = 1000
REPUBLISH_CHUNK = 5000
NO_UPPER = 2**63 - 1  # the last range is open: contacts added during the fan-out are reached
LOCK_NAMESPACE = 7301  # pg advisory lock (namespace, campaign id): one fan-out per campaign
MESSAGE_TABLE = EmailMessage._meta.db_table
SUPPRESSION_TABLE = Suppression._meta.db_table
# Only the audience's own per-recipient data (an inline audience's values; {} otherwise): the
# send path reads the contact's attributes, email, name, timezone and locale under it when it
# renders (delivery.services.ledger `_send_rows_sql`, decision 65).
CONTEXT_EXPR = "c.data"


def _now_param() -> object:
    return EmailMessage._meta.get_field("created_at").get_db_prep_save(timezone.now(), connection)


@dataclass
class FanoutReport:
    inserted: int = 0
    excluded: int = 0
    tasks: int = 0
    republished: int = 0
    finished: bool = False

    def add(self, other: FanoutReport) -> None:
        self.inserted += other.inserted
        self.excluded += other.excluded
        self.tasks += other.tasks


def _insert_columns(
    campaign: Campaign, schedule: dict, context_expr: str = CONTEXT_EXPR
) -> tuple[list[str], list[str], list]:
    """Columns, SQL expressions and parameters for every message column.

    Columns we do not set explicitly take their model default (so a column another app adds
    with a default keeps working); nullable ones stay NULL.
    """
    sched = schedule_sql(schedule)
    explicit = {
        "campaign": ("%s", [campaign.id]),
        "client": ("%s", [campaign.client_id]),
        "contact": ("c.id", []),
        "recipient": ("c.email", []),
        "context": (context_expr, []),
        "template_version": ("%s", [campaign.template_version_id]),
        "priority": ("%s", [campaign.priority]),
        "status": (sched.status_expr, []),
        "idempotency_key": ("'c:' || %s || ':' || c.id", [str(campaign.id)]),
        "created_at": ("%s", [_now_param()]),
        "scheduled_for": (sched.scheduled_for_expr, schedule_expr_params(schedule)),
    }
    columns, exprs, params = [], [], []
    for model_field in EmailMessage._meta.concrete_fields:
        if model_field.primary_key:
            continue
        if model_field.name in explicit:
            expr, expr_params = explicit[model_field.name]
        elif model_field.default is not NOT_PROVIDED:
            expr, expr_params = "%s", [model_field.get_db_prep_save(model_field.get_default(), connection)]
        elif model_field.null:
            continue
        else:
            raise RuntimeError(f"fan-out cannot fill {model_field.name}: no default")
        columns.append(model_field.column)
        exprs.append(expr)
        params.extend(expr_params)
    return columns, exprs, params


@dataclass(frozen=True)
class ChunkStatement:
    """One keyset chunk's SQL; the cursor and the range's upper bound fill one slot each per
    bounded column."""

    sql: str
    before: list
    after: list
    cursor_slots: int

    def params(self, cursor_id: int, upper: int = NO_UPPER) -> list:
        slots = self.cursor_slots
        return [*self.before, *[cursor_id] * slots, *[upper] * slots, *self.after]


def chunk_statement(campaign: Campaign) -> ChunkStatement:
    audience = audience_sql(campaign.audience, campaign_id=campaign.id)
    also = "".join(f" AND {column} > %s" for column in audience.keyset_also)
    below = "".join(f" AND {column} <= %s" for column in ("c.id", *audience.keyset_also))
    sched = schedule_sql(campaign.schedule)
    columns, exprs, insert_params = _insert_columns(campaign, campaign.schedule)
    sql = f"""
WITH scan AS (
  SELECT c.id, c.email, c.name, c.timezone, c.locale, c.attributes, c.subscribed,
         {audience.data_expr} AS data
  FROM {CONTACT_TABLE} c {audience.joins}
  WHERE {audience.where} AND c.id > %s{also}{below} ORDER BY c.id LIMIT %s
), eligible AS (
  SELECT s.* FROM scan s WHERE s.subscribed
    AND NOT EXISTS (SELECT 1 FROM {SUPPRESSION_TABLE} x WHERE x.email = s.email)
), ins AS (
  INSERT INTO {MESSAGE_TABLE} ({", ".join(columns)})
  SELECT {", ".join(exprs)} FROM eligible c {sched.joins}
  ON CONFLICT (idempotency_key) DO NOTHING RETURNING id, status, scheduled_for
)
SELECT (SELECT max(id) FROM scan), (SELECT count(*) FROM scan), (SELECT count(*) FROM eligible),
       COALESCE((SELECT array_agg(id ORDER BY id) FROM ins WHERE status = '{Status.QUEUED}'), '{{}}'),
       COALESCE((SELECT array_agg(ARRAY[id::float8, extract(epoch FROM scheduled_for)::float8])
                 FROM ins WHERE status = '{Status.SCHEDULED}'), '{{}}')
"""
    return ChunkStatement(sql, audience.params, [CHUNK_SIZE, *insert_params, *sched.params],
                          cursor_slots=1 + len(audience.keyset_also))


def campaign_fanout(*, campaign_id: int, republish_all: bool = False) -> FanoutReport:
    """Run (or continue) a campaign's fan-out; returns what this run did. A continuing fan-out
    first re-publishes the QUEUED rows its publishing had not reached, or with `republish_all`
    (a resume: the paused campaign's tasks were consumed and skipped) every unclaimed one."""
    report = FanoutReport()
    if not campaign_lock(campaign_id, wait=False):
        logger.info("fan-out of campaign %s already running elsewhere", campaign_id)
        return report
    try:
        return _fanout_locked(campaign_id, report, republish_all)
    finally:
        campaign_unlock(campaign_id)


def campaign_lock(campaign_id: int, *, wait: bool) -> bool:
    """A PostgreSQL session advisory lock on the campaign (True when held)."""
    function = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [LOCK_NAMESPACE, campaign_id])
        return wait or bool(cursor.fetchone()[0])


def campaign_unlock(campaign_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, campaign_id])


def _start(campaign_id: int) -> Campaign | None:
    """QUEUED -> SENDING (or stay SENDING on a restart); None when paused, cancelled or done.

    A SCHEDULED campaign stays SCHEDULED: its rows are written SCHEDULED and the scheduler's
    dispatch moves it to SENDING when its first row falls due.
    """
    cs = Campaign.Status
    updated = Campaign.objects.filter(pk=campaign_id, status__in=[cs.QUEUED, cs.SENDING]).update(
        status=cs.SENDING
    ) or Campaign.objects.filter(pk=campaign_id, status=cs.SCHEDULED).exists()
    if not updated:
        return None
    campaign = Campaign.objects.get(pk=campaign_id)
    if campaign.status == cs.SCHEDULED:
        return campaign
    if campaign.started_at is None:
        Campaign.objects.filter(pk=campaign_id, started_at__isnull=True).update(started_at=timezone.now())
    return campaign


def _fanout_locked(campaign_id: int, report: FanoutReport, republish_all: bool) -> FanoutReport:
    campaign = _start(campaign_id)
    if campaign is None:
        return report
    if campaign.fanout_cursor or campaign.fanout_done:
        published = {} if republish_all else fanout_published_marks(campaign.id)
        report.republished, report.tasks = campaign_unclaimed_republish(
            campaign=campaign, published=published)
        logger.info("fan-out of campaign %s continues: %d unclaimed rows published again (%s)",
                    campaign.id, report.republished, "past the publish marks" if published else "all")
        campaign_scheduled_restore(campaign_id=campaign.id)
    if campaign.fanout_done:
        _finish(campaign.id)  # restarts the completion checks that a pause stopped
        report.finished = True
        return report
    if campaign.audience.get("type") == "inline" and not campaign.fanout_cursor:
        inline_contacts_upsert(campaign_id=campaign.id)
    if campaign.audience_size is None:
        _audience_size_record(campaign)
    campaign_schedule_compiled(campaign=campaign, now=campaign.created_at)
    if not campaign.fanout_ranges and not campaign.fanout_cursor:
        campaign.fanout_ranges = _ranges_record(campaign)
    if campaign.fanout_ranges:
        return _ranges_write(campaign, report)
    with _Publisher(campaign, None, report) as publisher:
        whole = _Range(index=None, cursor=campaign.fanout_cursor, upper=NO_UPPER)
        finished = _range_write(campaign, whole, report, publisher, Event())
    if finished:
        _finish_recorded(campaign.id, report)
    return report


@dataclass
class _Range:
    """Contacts with cursor < id <= upper; `index` is its place in `fanout_ranges` (None: the
    single-connection fan-out, whose cursor is `fanout_cursor`)."""

    index: int | None
    cursor: int
    upper: int


def _ranges_record(campaign: Campaign) -> list[list[int]]:
    """Split a big audience into equal contact-id ranges, one per connection; [] for one.

    By id, not by count: the split costs two index probes, and a range that happens to hold
    more of the audience only finishes later (the others are done and idle by then).
    """
    connections = settings.NOTIFIER_FANOUT_CONNECTIONS
    if connections < 2 or (campaign.audience_size or 0) < settings.NOTIFIER_FANOUT_PARALLEL_MIN:
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(id), max(id) FROM {CONTACT_TABLE}")
        low, high = cursor.fetchone()
    if low is None:
        return []
    span = high - low + 1
    bounds = [low - 1 + span * k // connections for k in range(connections)] + [NO_UPPER]
    ranges = [[bounds[k], bounds[k + 1]] for k in range(connections)]
    Campaign.objects.filter(pk=campaign.id, fanout_cursor=0).update(fanout_ranges=ranges)
    return ranges


def _ranges_write(campaign: Campaign, report: FanoutReport) -> FanoutReport:
    """Write every range at once, one thread and connection each; finish when all are done."""
    stop = Event()  # a pause, cancel or error in one range stops the others after their chunk
    ranges = [_Range(index=i, cursor=cursor, upper=upper)
              for i, (cursor, upper) in enumerate(campaign.fanout_ranges)]
    parts = [FanoutReport() for _ in ranges]
    with ThreadPoolExecutor(max_workers=len(ranges), thread_name_prefix="fanout-range") as pool:
        futures = [pool.submit(_range_in_thread, campaign, rng, part, stop)
                   for rng, part in zip(ranges, parts, strict=True)]
    for part in parts:
        report.add(part)
    exhausted = [future.result() for future in futures]  # re-raises a range's error
    if all(exhausted):
        _finish_recorded(campaign.id, report)
    return report


def _range_in_thread(campaign: Campaign, rng: _Range, part: FanoutReport, stop: Event) -> bool:
    try:
        with _Publisher(campaign, rng.index, part) as publisher:
            return _range_write(campaign, rng, part, publisher, stop)
    except BaseException:
        stop.set()
        raise
    finally:
        connection.close()  # this thread's own connection


def _finish_recorded(campaign_id: int, report: FanoutReport) -> None:
    with transaction.atomic():
        _finish(campaign_id)
    report.finished = True


def _chunk_runner(campaign: Campaign) -> Callable[[int, int], tuple]:
    statement = chunk_statement(campaign)

    def run(cursor_id: int, upper: int) -> tuple:
        with connection.cursor() as cursor:
            # No WAL flush wait per chunk: a chunk lost in a crash loses its cursor move with it
            # and is written again on restart; ids published for it find nothing to claim.
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            cursor.execute(statement.sql, statement.params(cursor_id, upper))
            return cursor.fetchone()

    return run


def _range_write(
    campaign: Campaign, rng: _Range, report: FanoutReport, publisher: _Publisher, stop: Event
) -> bool:
    """Write one range chunk by chunk; True when it is exhausted, False when stopped."""
    publishes = schedule_sql(campaign.schedule).publishes
    run_chunk = _chunk_runner(campaign)
    cursor_id = rng.cursor
    while not stop.is_set():
        with transaction.atomic():
            last_id, scanned, eligible, queued_ids, *rest = run_chunk(cursor_id, rng.upper)
            if not scanned:
                return True
            cursor_id = last_id
            still_sending = _advance(campaign.id, rng.index, cursor_id, scanned - eligible)
        report.inserted += len(queued_ids)
        report.excluded += scanned - eligible
        if rest and rest[0]:
            # Committed SCHEDULED rows (the record) into the due set; if Redis fails here the
            # scheduler's overdue sweep, a restarted fan-out or rebuild_schedule adds them.
            due.messages_schedule(items=[(int(pk), datetime.fromtimestamp(at, tz=UTC)) for pk, at in rest[0]])
        if not still_sending:
            stop.set()
            return False  # paused or cancelled: resume re-publishes what was written
        if queued_ids and publishes:
            publisher.publish(queued_ids, cursor_id)
    return False


class _Publisher:
    """Publishes one range's committed chunks, in order, from one background thread while the
    next chunk is written, and marks how far it got after each (fanout_marks).

    Publishing (~2 ms per task to Redis) and the INSERT (PostgreSQL's time; psycopg2 releases
    the GIL) then overlap. At most `MAX_PENDING` chunks wait; leaving the block waits for all and
    re-raises a publish failure (the campaign's rows stay QUEUED; a re-run re-publishes them).
    """

    MAX_PENDING = 20

    def __init__(self, campaign: Campaign, range_index: int | None, report: FanoutReport):
        self.campaign_id = campaign.id
        self.priority = campaign.priority
        self.range_index = range_index
        self.report = report
        self.failed = False
        self.pending: deque[Future] = deque()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fanout-publish")

    def __enter__(self) -> _Publisher:
        return self

    def publish(self, ids: list[int], through_contact_id: int) -> None:
        """Publish a committed chunk's QUEUED ids; its range is written up to `through_contact_id`."""
        if len(self.pending) >= self.MAX_PENDING:
            self.report.tasks += self.pending.popleft().result()
        self.pending.append(self.executor.submit(self._publish_and_mark, ids, through_contact_id))

    def _publish_and_mark(self, ids: list[int], through_contact_id: int) -> int:
        try:
            tasks = messages_enqueue(message_ids=ids, priority=self.priority)
        except BaseException:
            self.failed = True  # a later chunk's mark would pass over this one's rows
            raise
        if not self.failed:
            fanout_published_mark(self.campaign_id, self.range_index, through_contact_id)
        return tasks

    def __exit__(self, *exc_info: object) -> None:
        try:
            while self.pending:
                self.report.tasks += self.pending.popleft().result()
        finally:
            self.executor.shutdown(wait=True)


def _advance(campaign_id: int, range_index: int | None, cursor_id: int, excluded: int) -> bool:
    """Move the range's cursor (and `fanout_cursor`, the progress the stall sweep watches) in the
    chunk's transaction; False when the campaign is no longer sending or scheduled."""
    if range_index is None:
        sql = (f"UPDATE {CAMPAIGN_TABLE} SET fanout_cursor = %s, excluded_count = excluded_count + %s "
               "WHERE id = %s AND fanout_cursor < %s RETURNING status")
        params = [cursor_id, excluded, campaign_id, cursor_id]
    else:
        path = [str(range_index), "0"]
        sql = (f"UPDATE {CAMPAIGN_TABLE} SET fanout_ranges = jsonb_set(fanout_ranges, %s::text[], "
               "to_jsonb(%s::bigint)), fanout_cursor = GREATEST(fanout_cursor, %s), "
               "excluded_count = excluded_count + %s "
               "WHERE id = %s AND (fanout_ranges #>> %s::text[])::bigint < %s RETURNING status")
        params = [path, cursor_id, cursor_id, excluded, campaign_id, path, cursor_id]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row is not None and row[0] in (Campaign.Status.SENDING, Campaign.Status.SCHEDULED)


def _audience_size_record(campaign: Campaign) -> None:
    """The denominator of the campaign's progress, before its first chunk is written."""
    campaign.audience_size = audience_count(campaign.audience, campaign_id=campaign.id)
    Campaign.objects.filter(pk=campaign.id).update(audience_size=campaign.audience_size)


def _finish(campaign_id: int) -> None:
    # The first finish makes audience_size exact: contacts that joined or left the audience
    # while the fan-out ran moved it away from the count taken at the start.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CAMPAIGN_TABLE} SET fanout_done = TRUE, audience_size = excluded_count + "
            f"(SELECT count(*) FROM {MESSAGE_TABLE} WHERE campaign_id = %s) "
            "WHERE id = %s AND NOT fanout_done",
            [campaign_id, campaign_id],
        )
    campaign_schedule_record_update(campaign_id=campaign_id)
    transaction.on_commit(lambda: campaign_progress_check_later(campaign_id))


def campaign_unclaimed_republish(
    *, campaign: Campaign, published: dict[str, int] | None = None
) -> tuple[int, int]:
    """Publish again the campaign's QUEUED, unclaimed rows: (rows, tasks). Every one, or with
    `published` (a fan-out's marks: range field -> contact id) only each range's rows past its mark."""
    if not published:
        return _republish_pages(campaign, "id", after=0, upper=None)
    rows = tasks = 0
    for after, upper in _unpublished_windows(campaign, published):
        window_rows, window_tasks = _republish_pages(campaign, "contact_id", after=after, upper=upper)
        rows, tasks = rows + window_rows, tasks + window_tasks
    return rows, tasks


def _unpublished_windows(campaign: Campaign, published: dict[str, int]) -> list[tuple[int, int]]:
    """(after, upper] contact ids per range whose rows may be unpublished. A range's lower bound
    is the upper bound of the one before it (its own first element is its moving cursor)."""
    if not campaign.fanout_ranges:
        return [(published.get(range_field(None), 0), NO_UPPER)]
    windows, lower = [], 0
    for index, (_cursor, upper) in enumerate(campaign.fanout_ranges):
        windows.append((max(lower, published.get(range_field(index), lower)), upper))
        lower = upper
    return windows


def _republish_pages(campaign: Campaign, order: str, *, after: int, upper: int | None) -> tuple[int, int]:
    rows = tasks = 0
    while True:
        page = campaign_queued_page(campaign_id=campaign.id, order=order, after=after, upper=upper,
                                    limit=REPUBLISH_CHUNK)
        if not page:
            return rows, tasks
        rows += len(page)
        tasks += messages_enqueue(message_ids=[pk for pk, _ in page], priority=campaign.priority)
        after = page[-1][1]
