"""Topic choices of many recipients at once (the bulk contacts API, the CSV import): two
statements for any number of rows, never one query per row.

The rule is the consent services' (audience.services.consent), set-wise: a recipient with no
choice yet gets a row in the topic's default state first, then the rows are locked (in one
order, so two imports never deadlock) and changed only where the choice differs; exactly those
changes are recorded in the history (ConsentChange, with the source), so re-importing a file
records nothing. The callers refuse a choice to join a topic for an address suppressed for
every stream before they get here (`everywhere_suppressed`).
"""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

from audience.models import ConsentChange, Suppression, Topic, TopicSubscription
from eventlog.payloads import recipient_data_sql
from eventlog.types import EventType
from eventlog.writes import events_insert_sql

SUBSCRIPTION_TABLE = TopicSubscription._meta.db_table
CHANGE_TABLE = ConsentChange._meta.db_table
SUPPRESSION_TABLE = Suppression._meta.db_table
TOPIC_TABLE = Topic._meta.db_table

# `choices` is a SELECT of (email, topic_id, subscribed), one row per (email, topic).
_DEFAULT_ROWS = f"""
INSERT INTO {SUBSCRIPTION_TABLE} (topic_id, email, subscribed, updated_at)
SELECT c.topic_id, c.email, t.default_subscribed, now()
FROM ({{choices}}) AS c(email, topic_id, subscribed) JOIN {TOPIC_TABLE} t ON t.id = c.topic_id
ORDER BY c.topic_id, c.email
ON CONFLICT (topic_id, email) DO NOTHING
"""
_CHANGES = f"""
WITH chosen AS (
  SELECT s.id, c.topic_id, c.email, c.subscribed
  FROM ({{choices}}) AS c(email, topic_id, subscribed)
  JOIN {SUBSCRIPTION_TABLE} s ON s.topic_id = c.topic_id AND s.email = c.email
  -- Only the rows to change are locked (a repeated import locks and dirties nothing); a row a
  -- concurrent change updated meanwhile is read again, and this condition checked on it.
  WHERE s.subscribed IS DISTINCT FROM c.subscribed
  ORDER BY s.topic_id, s.email
  FOR UPDATE OF s
), changed AS (
  UPDATE {SUBSCRIPTION_TABLE} s SET subscribed = chosen.subscribed, updated_at = now()
  FROM chosen WHERE s.id = chosen.id AND s.subscribed IS DISTINCT FROM chosen.subscribed
  RETURNING s.topic_id, s.email, s.subscribed
), recorded AS (
  INSERT INTO {CHANGE_TABLE} (client_id, email, topic_id, subscribed, source, occurred_at)
  SELECT %s, email, topic_id, subscribed, %s, now() FROM changed
  RETURNING client_id, email, topic_id, subscribed, source, occurred_at
), ev AS ({{events}})
SELECT count(*) FROM recorded
"""
# Each change's service event (decision 115), for a service that records its type.
_EVENTS = events_insert_sql(
    rows=f"recorded JOIN {TOPIC_TABLE} et ON et.id = recorded.topic_id", service="recorded.client_id",
    event_type=(f"(CASE WHEN recorded.subscribed THEN '{EventType.PREFERENCES_CHANGED.value}' "
                f"ELSE '{EventType.UNSUBSCRIBED.value}' END)::varchar"),
    message_id="NULL::bigint", occurred_at="recorded.occurred_at",
    data=recipient_data_sql(recipient="recorded.email", topic="et.name", subscribed="recorded.subscribed",
                            source="recorded.source"))


def topic_choices_apply(cursor: CursorWrapper, *, service_id: str, choices_sql: str, params: list,
                        source: str) -> int:
    """Apply the choices `choices_sql` (with `params`) selects, in the caller's transaction;
    the number of changes recorded. Their topics must be the service's own."""
    cursor.execute(_DEFAULT_ROWS.format(choices=choices_sql), params)
    cursor.execute(_CHANGES.format(choices=choices_sql, events=_EVENTS), [*params, service_id, source])
    return cursor.fetchone()[0]


def everywhere_suppressed(emails: list[str]) -> dict[str, str]:
    """{address: reason} of those suppressed for every stream (live): one query."""
    if not emails:
        return {}
    return dict(Suppression.objects.filter(email__in=emails, sandbox=False, scope=Suppression.Scope.ALL)
                .values_list("email", "reason"))
