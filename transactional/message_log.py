"""The message log a service searches (GET /api/v1/messages, issue 29): its own messages,
newest first, by (created_at, id) keyset, never a COUNT and never an OFFSET.

Every query leads with the service (`client_id = X`) and reads one of four indexes
(delivery/models.py, decisions 114 and 116): (client, created_at, id) walked newest first for
most filters; (campaign, status, created_at, id) for `campaign`, one range per status merged;
(client, lower(recipient), created_at, id) of the rows of no contact, (client, recipient_hash,
created_at, id) of those past their personal retention (decision 120), plus the service's
contact of that address through the contact index, for `recipient`; the GIN index of
`metadata` (jsonb_path_ops) for `metadata.<key>`. The cursor is the last row's (created_at, id):
a page never repeats or skips a row that was there when the first page was read, and a message
accepted meanwhile is newer than every cursor, so it is on no later page.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Lower

from audience.models import Contact
from clients.key_types import KeyType, on_callers_side
from core.api.metadata import Scalar
from core.personal_data import recipient_hash
from delivery.models import EmailMessage
from templates.models import TemplateVersion

TABLE = EmailMessage._meta.db_table


class InvalidCursorError(ValueError):
    """A cursor this code did not make."""


@dataclass(frozen=True)
class LogCursor:
    """The (created_at, id) of the last message of a page, as an opaque string."""

    created_at: datetime
    id: int

    def encode(self) -> str:
        micros = int(self.created_at.timestamp() * 1_000_000)
        return base64.urlsafe_b64encode(f"{micros}.{self.id}".encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> LogCursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
            micros, message_id = (int(part) for part in raw.split("."))
            if micros < 0 or not 0 < message_id < 2**63:
                raise ValueError(text)
            return cls(datetime.fromtimestamp(micros / 1_000_000, tz=UTC), message_id)
        except (ValueError, UnicodeDecodeError, OverflowError, OSError) as error:
            raise InvalidCursorError(text) from error


@dataclass(frozen=True)
class LogFilters:
    """What the caller narrowed the log to (each already validated; None: not narrowed)."""

    recipient: str | None = None
    status: str | None = None
    template_id: int | None = None
    campaign_id: int | None = None
    stream: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)


def metadata_candidates(key: str, text: str) -> list[dict[str, Scalar]]:
    """The stored values a query string `text` matches: the string itself, and the number or
    boolean it spells (`?metadata.attempt=2` finds `{"attempt": 2}` and `{"attempt": "2"}`)."""
    found: list[dict[str, Scalar]] = [{key: text}]
    if text in ("true", "false"):
        found.append({key: text == "true"})
    else:
        try:
            number = float(text)
        except ValueError:
            return found
        if number == number and abs(number) != float("inf"):
            found.append({key: int(number) if number.is_integer() else number})
    return found


def _metadata_q(key: str, text: str) -> Q:
    """`metadata @> {key: value}` for each candidate: each containment is answered by the GIN
    index (an OR of them is a BitmapOr)."""
    q = Q()
    for candidate in metadata_candidates(key, text):
        q |= Q(metadata__contains=candidate)
    return q


def _recipient_contact(service_id: str, address: str) -> int | None:
    """The service's contact of this address (contact emails are stored lower-cased)."""
    return (Contact.objects.filter(client_id=service_id, email=address.lower())
            .values_list("id", flat=True).first())


def _per_status(rows: QuerySet[EmailMessage]) -> list[QuerySet[EmailMessage]]:
    """One campaign's rows as one query per status, each read newest first in
    msg_campaign_cover_idx's own order and stopped at the page's size; their merge is the page.
    As one query the planner walked the service's newest rows (a campaign is written in one
    burst, its rows far from the newest: 734 ms p99 on 10M rows); the index cannot serve every
    status in (created_at, id) order at once (decision 116)."""
    return [rows.filter(status=status) for status in EmailMessage.Status.values]


def _before(cursor: LogCursor) -> RawSQL:
    """(created_at, id) < cursor as one row comparison: an index range, not an OR."""
    return RawSQL(f'("{TABLE}"."created_at", "{TABLE}"."id") < (%s, %s)',
                  (cursor.created_at, cursor.id), output_field=BooleanField())


def log_querysets(*, service_id: str, key_type: str, filters: LogFilters, after: LogCursor | None,
                  limit: int, asked_key_type: str | None = None,
                  visible_since: Mapping[str, datetime] | None = None) -> list[QuerySet[EmailMessage]]:
    """The queries whose merged rows are the page: one per status for `campaign` alone, one, or
    two for `recipient` when the service has a contact of that address (its one-off rows by
    msg_client_recipient_idx, its campaign rows by msg_contact_idx). Two queries, not an OR:
    with the OR the planner guessed the address common (no statistics on lower(recipient)) and
    walked every row of the service (6.8 s on 5M rows); each alone follows its own index,
    newest first, and stops at `limit`."""
    rows = EmailMessage.objects.filter(client_id=service_id)
    rows = on_callers_side(rows, KeyType.TEST if asked_key_type == KeyType.TEST else key_type)
    if visible_since:
        rows = within_retention(rows, visible_since)
    if filters.status is not None:
        rows = rows.filter(status=filters.status)
    if filters.template_id is not None:
        # A hashed subplan over the template's versions: no join per row walked.
        versions = TemplateVersion.objects.filter(template_id=filters.template_id).values("id")
        rows = rows.filter(template_version_id__in=versions)
    if filters.campaign_id is not None:
        rows = rows.filter(campaign_id=filters.campaign_id)
    if filters.stream is not None:
        rows = rows.filter(stream=filters.stream)
    if filters.created_after is not None:
        rows = rows.filter(created_at__gte=filters.created_after)
    if filters.created_before is not None:
        rows = rows.filter(created_at__lt=filters.created_before)
    for key, text in filters.metadata.items():
        rows = rows.filter(_metadata_q(key, text))
    if after is not None:
        rows = rows.filter(_before(after))
    queries = [rows]
    if filters.campaign_id is not None and filters.status is None and filters.recipient is None:
        queries = _per_status(rows)
    if filters.recipient is not None:
        contact_id = _recipient_contact(service_id, filters.recipient)
        queries = [rows.alias(recipient_lower=Lower("recipient"))
                   .filter(contact__isnull=True, recipient_lower=filters.recipient.lower()),
                   # Rows past their personal retention keep only the address's keyed hash
                   # (decision 120): msg_client_recipient_hash_idx, in the same order.
                   rows.filter(contact__isnull=True, recipient_hash=recipient_hash(filters.recipient))]
        if contact_id is not None:
            queries.append(rows.filter(contact_id=contact_id))
    return [query.order_by("-created_at", "-id")[:limit] for query in queries]


def within_retention(rows: QuerySet[EmailMessage],
                     visible_since: Mapping[str, datetime]) -> QuerySet[EmailMessage]:
    """Only the rows the service still reads ({stream: oldest creation time read}, from its
    metadata retention, decision 120): the oldest bound is a range of every index the log
    walks (each ends in created_at), a stream with a shorter one is a filter on top."""
    oldest = min(visible_since.values())
    rows = rows.filter(created_at__gte=oldest)
    shorter = {stream: since for stream, since in visible_since.items() if since > oldest}
    for stream, since in shorter.items():
        rows = rows.exclude(stream=stream, created_at__lt=since)
    return rows


def messages_log(*, service_id: str, key_type: str, filters: LogFilters, after: LogCursor | None,
                 limit: int, asked_key_type: str | None = None,
                 visible_since: Mapping[str, datetime] | None = None) -> list[EmailMessage]:
    """The service's messages matching `filters`, newest first, after `after`, at most `limit`
    (the caller asks for limit + 1 to know whether there is a next page); none created before
    `visible_since` of its stream (the service's metadata retention)."""
    queries = log_querysets(service_id=service_id, key_type=key_type, filters=filters, after=after,
                            limit=limit, asked_key_type=asked_key_type, visible_since=visible_since)
    if len(queries) == 1:
        return list(queries[0])
    # One round trip: each part keeps its own ORDER BY .. LIMIT (its index walk), the UNION ALL
    # is merged by the server (as 12 statements a campaign's page took 19.4 ms p50 from Python,
    # 2.0 ms of it in PostgreSQL: the rest was round trips and Django, decision 116).
    merged = queries[0].union(*queries[1:], all=True)
    return list(merged.order_by("-created_at", "-id")[:limit])
