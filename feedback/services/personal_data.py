"""What feedback keeps of personal data, removed after retention (issue 30, decision 120).

- `events_of_messages_strip`: a delivery personal-data remover. In the transaction that strips a
  batch of messages, their ESP events lose the address, the raw payload and the clicked link's
  query (the link's path is kept, the address redacted from it), by the (message, type) index.
- `esp_events_step`: the events no message batch reached: those about no message of ours, and
  those a webhook stored while their message was being stripped. A walk by `received_at`
  (its index) from a RetentionMark, up to the shortest retention of any service: an event past
  it is stripped if its message is gone or stripped; one whose message still keeps its data
  (a longer retention) is passed, its message's batch strips it.
- `webhook_bodies_step`: the raw requests (every event of every service in one body) are
  emptied once processed and past the shortest retention of any service; a walk by id from a
  RetentionMark that stops at the first request still pending.
SoftBounceTally (addresses counted towards a suppression) and the suppressions themselves are
kept: they are what stops the platform mailing an address, not a message's history.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection, transaction

from clients.personal_data import ExpireRun, Mark, mark_read, mark_write
from core.partitions.routing import ids_span_sql
from core.personal_data import redact, url_without_query
from delivery.models import EmailMessage
from feedback.models import EmailEvent, WebhookDelivery

EVENT_TABLE = EmailEvent._meta.db_table
MESSAGE_TABLE = EmailMessage._meta.db_table
WEBHOOK_TABLE = WebhookDelivery._meta.db_table
EVENTS_MARK = "feedback:esp_events"
BODIES_MARK = "feedback:webhook_bodies"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HOLDS_DATA = "(e.recipient <> '' OR e.raw <> '{}'::jsonb OR e.url LIKE '%%?%%' OR e.url LIKE '%%#%%')"


def _events_strip(rows: list[tuple[int, str, str]]) -> int:
    """[(event id, url, the address to redact from it)]: one UPDATE over arrays."""
    if not rows:
        return 0
    urls = [redact(url_without_query(url), address) if address else url_without_query(url)
            for _, url, address in rows]
    sql = (f"UPDATE {EVENT_TABLE} AS e SET recipient = '', raw = '{{}}'::jsonb, url = v.url "
           f"FROM unnest(%s::bigint[], %s::text[]) AS v(id, url) WHERE e.id = v.id "
           f"AND {ids_span_sql('e', [row[0] for row in rows])}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [[row[0] for row in rows], urls])
        return cursor.rowcount


def events_of_messages_strip(addresses: dict[int, str]) -> int:
    """The delivery remover: the ESP events of these messages ({id: the address they had})."""
    sql = (f"SELECT e.id, e.message_id, e.url FROM {EVENT_TABLE} e "
           f"WHERE e.message_id = ANY(%s) AND {_HOLDS_DATA}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [sorted(addresses)])
        found = cursor.fetchall()
    return _events_strip([(event_id, url, addresses[message_id]) for event_id, message_id, url in found])


def esp_events_step(run: ExpireRun) -> dict[str, int]:
    """ESP events past the shortest retention whose message is gone or stripped."""
    before = run.latest_cutoff()
    mark = mark_read(EVENTS_MARK)
    start = mark.at or EPOCH
    if run.dry_run:
        sql = (f"SELECT count(*) FROM {EVENT_TABLE} e LEFT JOIN {MESSAGE_TABLE} m ON m.id = e.message_id "
               f"WHERE e.received_at >= %s AND e.received_at < %s AND {_HOLDS_DATA} "
               f"AND (m.id IS NULL OR m.personal_data_removed_at IS NOT NULL)")
        with connection.cursor() as cursor:
            cursor.execute(sql, [start, before])
            return {"esp_events": cursor.fetchone()[0]}
    stripped = 0
    while not run.out_of_time():
        with transaction.atomic():
            sql = (f"SELECT e.id, e.received_at, e.url, {_HOLDS_DATA} AND (m.id IS NULL OR "
                   f"m.personal_data_removed_at IS NOT NULL) FROM {EVENT_TABLE} e "
                   f"LEFT JOIN {MESSAGE_TABLE} m ON m.id = e.message_id "
                   f"WHERE e.received_at >= %s AND (e.received_at, e.id) > (%s, %s) AND e.received_at < %s "
                   f"ORDER BY e.received_at, e.id LIMIT %s")
            with connection.cursor() as cursor:
                cursor.execute(sql, [start, start, mark.id, before, run.batch_size])
                rows = cursor.fetchall()
            stripped += _events_strip([(event_id, url, "") for event_id, _, url, due in rows if due])
            # Everything up to the cutoff is done once a short batch is read: the walk resumes
            # there (an event is stored with the time its webhook was received: none lands behind).
            if rows:
                read = Mark(rows[-1][1], rows[-1][0]) if len(rows) == run.batch_size else Mark(before, 0)
                mark = read.at_least(mark)
                mark_write(EVENTS_MARK, mark)
        start = mark.at or EPOCH
        if len(rows) < run.batch_size:
            break
    return {"esp_events": stripped}


def webhook_bodies_step(run: ExpireRun) -> dict[str, int]:
    """Processed (or failed) webhook requests received before the shortest retention: body ''."""
    before = run.latest_cutoff()
    mark = mark_read(BODIES_MARK)
    if run.dry_run:
        count = (WebhookDelivery.objects.filter(id__gt=mark.id, received_at__lt=before)
                 .exclude(status=WebhookDelivery.Status.PENDING).exclude(body="").count())
        return {"webhook_bodies": count}
    emptied = 0
    while not run.out_of_time():
        with transaction.atomic():
            rows = list(WebhookDelivery.objects.filter(id__gt=mark.id).order_by("id")
                        .values_list("id", "received_at", "status")[:run.batch_size])
            done = []
            for delivery_id, received_at, status in rows:
                if received_at >= before or status == WebhookDelivery.Status.PENDING:
                    break  # the walk waits here: ids follow the time of receipt
                done.append(delivery_id)
            if done:
                emptied += WebhookDelivery.objects.filter(id__in=done).exclude(body="").update(body="")
                mark = Mark(None, done[-1])
                mark_write(BODIES_MARK, mark)
        if len(done) < run.batch_size:
            break
    return {"webhook_bodies": emptied}
