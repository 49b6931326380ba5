"""The fan-out's SQL: one keyset chunk of the audience INSERTed ... SELECTed as message rows (the
anti-join drops unsubscribed contacts and suppressed addresses), run without a WAL flush wait,
and the move of a range's cursor in the chunk's transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection
from django.db.models import NOT_PROVIDED
from django.utils import timezone

from audience.models import Stream, Suppression
from audience.selectors import SUBSCRIPTION_TABLE, email_is_suppressed_sql
from campaigns.audience import CAMPAIGN_TABLE, CONTACT_TABLE, audience_sql
from campaigns.models import Campaign
from campaigns.schedule_sql import schedule_expr_params, schedule_sql
from campaigns.services.fanout.ranges import NO_UPPER
from clients.key_types import KeyType
from core.partitions.routing import execute_routed
from delivery.models import EmailMessage

Status = EmailMessage.Status
CHUNK_SIZE = 1000
MESSAGE_TABLE = EmailMessage._meta.db_table
SUPPRESSION_TABLE = Suppression._meta.db_table
# Only the audience's own per-recipient data (an inline audience's values; {} otherwise): the
# send path reads the contact's attributes, email, name, timezone and locale under it when it
# renders (delivery/services/ledger/send_reads.py `send_rows_sql`, decision 65).
CONTEXT_EXPR = "c.data"


def _now_param() -> object:
    return EmailMessage._meta.get_field("created_at").get_db_prep_save(timezone.now(), connection)


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
        "key_type": ("%s", [campaign.key_type]),  # each row is of its campaign's key type
        "stream": ("%s", [Stream.BROADCAST.value]),
        "topic": ("%s", [campaign.topic_id]),
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


def consent_filter_sql(campaign: Campaign, sandbox: str) -> tuple[str, list]:
    """The anti-joins of consent (issue 28) over the scan's row `s`, after the all-streams one:
    the recipient left the service's broadcast stream, or the campaign's topic. The service and
    the topic are constants (each a probe of one unique index per contact); a topic most are in
    skips who left it, an opt-in topic takes only who joined it."""
    left_stream = (f"EXISTS (SELECT 1 FROM {SUPPRESSION_TABLE} b "
                   f"WHERE b.email = s.email AND b.sandbox = {sandbox} "
                   f"AND b.client_id = %s AND b.scope = '{Suppression.Scope.BROADCAST}')")
    sql, params, topic = f"\n    AND NOT {left_stream}", [campaign.client_id], campaign.topic
    if topic is None:
        return sql, params
    chose = f"SELECT 1 FROM {SUBSCRIPTION_TABLE} ts WHERE ts.topic_id = {topic.pk:d} AND ts.email = s.email"
    if topic.default_subscribed:
        return f"{sql}\n    AND NOT EXISTS ({chose} AND NOT ts.subscribed)", params
    return f"{sql}\n    AND EXISTS ({chose} AND ts.subscribed)", params


def chunk_statement(campaign: Campaign) -> ChunkStatement:
    audience = audience_sql(campaign.audience, campaign_id=campaign.id)
    also = "".join(f" AND {column} > %s" for column in audience.keyset_also)
    below = "".join(f" AND {column} <= %s" for column in ("c.id", *audience.keyset_also))
    sched = schedule_sql(campaign.schedule)
    columns, exprs, insert_params = _insert_columns(campaign, campaign.schedule)
    # A test campaign skips the test key's suppressions, a live one the live ones (a constant:
    # the anti-join keeps its one index probe per contact).
    sandbox = "TRUE" if campaign.key_type == KeyType.TEST else "FALSE"
    consent, consent_params = consent_filter_sql(campaign, sandbox)
    sql = f"""
WITH scan AS (
  SELECT c.id, c.email, c.name, c.timezone, c.locale, c.attributes, c.subscribed,
         {audience.data_expr} AS data
  FROM {CONTACT_TABLE} c {audience.joins}
  WHERE {audience.where} AND c.id > %s{also}{below} ORDER BY c.id LIMIT %s
), eligible AS (
  SELECT s.* FROM scan s WHERE s.subscribed
    AND NOT {email_is_suppressed_sql("s.email", sandbox)}{consent}
), ins AS (
  INSERT INTO {MESSAGE_TABLE} ({", ".join(columns)})
  SELECT {", ".join(exprs)} FROM eligible c {sched.joins}
  ON CONFLICT DO NOTHING RETURNING id, status, scheduled_for
)
SELECT (SELECT max(id) FROM scan), (SELECT count(*) FROM scan), (SELECT count(*) FROM eligible),
       COALESCE((SELECT array_agg(id ORDER BY id) FROM ins WHERE status = '{Status.QUEUED}'), '{{}}'),
       COALESCE((SELECT array_agg(ARRAY[id::float8, extract(epoch FROM scheduled_for)::float8])
                 FROM ins WHERE status = '{Status.SCHEDULED}'), '{{}}')
"""
    return ChunkStatement(sql, audience.params, [CHUNK_SIZE, *consent_params, *insert_params, *sched.params],
                          cursor_slots=1 + len(audience.keyset_also))


def chunk_runner(campaign: Campaign) -> Callable[[int, int], tuple]:
    statement = chunk_statement(campaign)

    def run(cursor_id: int, upper: int) -> tuple:
        with connection.cursor() as cursor:
            # No WAL flush wait per chunk: a chunk lost in a crash loses its cursor move with it
            # and is written again on restart; ids published for it find nothing to claim.
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            execute_routed(cursor, statement.sql, statement.params(cursor_id, upper))
            return cursor.fetchone()

    return run


def range_cursor_advance(campaign_id: int, range_index: int | None, cursor_id: int, excluded: int) -> bool:
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
