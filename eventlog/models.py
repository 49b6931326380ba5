"""The event log table and the per-service list of event types worth recording."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Func

from eventlog.types import EventType


class TransactionIdField(models.Field):
    """PostgreSQL's `xid8`: the 64-bit id of the transaction that wrote the row.

    Readers follow the log by (txid, id) and only up to the oldest transaction still running
    (`pg_snapshot_xmin(pg_current_snapshot())`), so a row committed after a reader passed its
    id is never skipped: ids are handed out at INSERT, not at COMMIT (decision 110).
    """

    def db_type(self, connection) -> str:
        return "xid8"

    def from_db_value(self, value, expression, connection) -> int | None:
        return None if value is None else int(value)


class ServiceEvent(models.Model):
    """One thing that happened, told to one service. Append-only."""

    # No database constraint and no separate index (the log's own index leads with it): a
    # service deleted keeps nothing here that a query would follow.
    service = models.ForeignKey(
        "clients.Service", on_delete=models.DO_NOTHING, db_constraint=False, db_index=False,
        related_name="+",
    )
    type = models.CharField(max_length=32, choices=EventType.choices)
    # The message it is about (none for a preference change made without a message). A plain
    # column: messages are expired on their own schedule, the event outlives its row.
    message_id = models.BigIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField()
    # What the writer knew: the service's references (idempotency key, metadata, campaign),
    # and the type's own facts (provider, bounce type, url, topic, error).
    data = models.JSONField(default=dict)
    txid = TransactionIdField(db_default=Func(function="pg_current_xact_id"), editable=False)
    recorded_at = models.DateTimeField(db_default=Func(function="now"), editable=False)

    class Meta:
        indexes = [
            # The readers' one query: a service's events after a cursor, in (txid, id) order.
            models.Index(fields=["service", "txid", "id"], name="svcevent_service_cursor_idx"),
            # Expiry by age.
            models.Index(fields=["recorded_at"], name="svcevent_recorded_idx"),
            # `since=`: the oldest transaction that recorded a service's event since a time,
            # read from the index alone (eventlog.selectors.since_cursor).
            models.Index(fields=["service", "recorded_at"], include=["txid"],
                         name="svcevent_service_since_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.service_id} {self.type} #{self.message_id}"


class RecordedEventTypes(models.Model):
    """The event types the log records for one service: those at least one of its endpoints
    (enabled or not) asked for. Writers join it, so a service that wants nothing pays one
    index probe per statement and writes no row (decision 110)."""

    service = models.OneToOneField(
        "clients.Service", on_delete=models.CASCADE, primary_key=True, related_name="+",
    )
    types = ArrayField(models.CharField(max_length=32), default=list)

    def __str__(self) -> str:
        return f"{self.service_id}: {', '.join(self.types)}"
