"""The send ledger: one row per email, and one attempt row per provider call.

PostgreSQL is the system of record. A worker moves a row QUEUED -> SENDING with one conditional
UPDATE before it talks to any provider, so a redelivered task finds nothing to claim; the unique
idempotency key makes a repeated API call or a restarted fan-out write nothing new.

Messages and attempts are partitioned by day on their id (delivery/partitioning.py, decision
122): an id carries its UTC day (`day << 32 | sequence`), so no constraint here reaches across
days; the idempotency key is unique within a day and checked across the day before by the
accept statements, and nothing holds a database foreign key to a message (its day is dropped
whole at expiry).
"""

from __future__ import annotations

from django.contrib.postgres.indexes import BrinIndex, GinIndex
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce, Lower

import core.db_lookups  # noqa: F401  (`status__unindexed=...`: core/db_lookups.py)
from audience.models import Stream
from clients.key_types import KeyType
from core.priorities import Priority
from delivery.providers.base import Outcome

# A message no send will touch again: personal-data removal may take these (decision 120).
# QUEUED, SCHEDULED, SENDING and AMBIGUOUS are in flight and never scrubbed. A FAILED row can
# still be requeued by an operator until it is scrubbed (the requeue refuses scrubbed rows).
SETTLED_STATUSES = ("SENT", "DELIVERED", "OPENED", "CLICKED", "BOUNCED", "COMPLAINED", "FAILED",
                    "SUPPRESSED", "CANCELLED")


class EmailMessage(models.Model):
    class Status(models.TextChoices):
        QUEUED = "QUEUED"
        SCHEDULED = "SCHEDULED"
        SENDING = "SENDING"
        # Handed to a provider with no answer (crash or timeout): never resent blindly,
        # reconciled from webhooks or a provider lookup.
        AMBIGUOUS = "AMBIGUOUS"
        SENT = "SENT"
        DELIVERED = "DELIVERED"
        OPENED = "OPENED"
        CLICKED = "CLICKED"
        BOUNCED = "BOUNCED"
        COMPLAINED = "COMPLAINED"
        FAILED = "FAILED"
        SUPPRESSED = "SUPPRESSED"
        CANCELLED = "CANCELLED"

    # Index set: see Meta and docs/decisions.md 27. Every index is paid on each of the fan-out's
    # million INSERTs, so the foreign keys get only the indexes a query needs.
    # No database constraint (decision 63): its per-row `FOR KEY SHARE` check at each fan-out
    # chunk's commit was ~15% of the chunk. Django still cascades a campaign's deletion; a row a
    # chunk wrote in a race with it names no campaign, and the claim guard refuses such a row
    # (campaigns/claim_guard.py: the campaign must exist and not be stopped).
    campaign = models.ForeignKey(
        "campaigns.Campaign", null=True, blank=True, on_delete=models.CASCADE, related_name="messages",
        db_index=False, db_constraint=False,
    )
    # No database constraint either (decision 58): its per-row check was ~15% of a fan-out
    # chunk; Django applies SET_NULL when a client is deleted, and a row written in a race with
    # that delete keeps an id no client has, which no per-client query matches.
    client = models.ForeignKey(
        "clients.Service", null=True, blank=True, on_delete=models.SET_NULL, db_index=False,
        db_constraint=False,
    )
    # No database constraint on contact and template version: PostgreSQL would check both once
    # per inserted row (~40% of a fan-out chunk with the index set below); Django still applies
    # SET_NULL / PROTECT on delete, versions are never deleted (soft delete), and a row whose
    # contact vanished in a race reads it as None (select_related is a LEFT JOIN). Decision 27.
    contact = models.ForeignKey(
        "audience.Contact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        db_index=False, db_constraint=False,
    )
    recipient = models.EmailField(max_length=254)
    context = models.JSONField(default=dict, blank=True)
    template_version = models.ForeignKey(
        "templates.TemplateVersion", on_delete=models.PROTECT, db_index=False, db_constraint=False
    )
    priority = models.PositiveSmallIntegerField(
        choices=[(p.value, p.label) for p in Priority], default=Priority.NORMAL
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    provider = models.CharField(max_length=20, blank=True, default="")
    provider_message_id = models.CharField(max_length=255, blank=True, default="")
    attempts = models.PositiveSmallIntegerField(default=0)
    idempotency_key = models.CharField(max_length=300)  # unique: Meta.constraints
    # Which task claimed the row and when; `send_started_at` is set just before the provider
    # call, which separates "claimed, safe to retry" from "handed over, ambiguous".
    claim_token = models.CharField(max_length=64, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    send_started_at = models.DateTimeField(null=True, blank=True)
    # Set when the recovery loop re-publishes a QUEUED row whose task was lost (e.g. the broker
    # was down at commit time); spaces such re-publishes out.
    requeued_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    scheduled_for = models.DateTimeField(null=True, blank=True)
    # The caller's handle to cancel a delayed send before it leaves (e.g. "cart-42").
    cancel_key = models.CharField(max_length=200, blank=True, default="")
    sent_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    clicked_at = models.DateTimeField(null=True, blank=True)
    bounced_at = models.DateTimeField(null=True, blank=True)
    # The type of the key that created it (issue 27): a test message is settled by the sandbox,
    # never handed to an ESP, and stays out of the live figures. `db_default`: adding the column
    # writes no row of the big table (PostgreSQL keeps a constant default in the catalogue).
    # No index: every query that reads it also narrows by an indexed column first.
    key_type = models.CharField(max_length=4, choices=KeyType.choices, default=KeyType.LIVE,
                                db_default=KeyType.LIVE)
    # Its stream and topic (issue 28, decision 106): what may stop it at accept and at send.
    # `db_default` as key_type; campaign rows are broadcast (migration 0015 moves old ones).
    # No constraint on topic (topics are archived, never deleted) and no index: the send path
    # reads it from the row it already has.
    stream = models.CharField(max_length=13, choices=Stream.choices, default=Stream.TRANSACTIONAL,
                              db_default=Stream.TRANSACTIONAL)
    topic = models.ForeignKey("audience.Topic", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+", db_index=False, db_constraint=False)
    # The sending service's own references (issue 29): a flat object of up to 20 keys
    # (core/api/metadata.py), NULL when none were given, so a campaign row stores nothing and
    # pays nothing in the metadata index (partial: WHERE metadata IS NOT NULL).
    metadata = models.JSONField(null=True, blank=True)
    # Personal-data removal after the service's retention (issue 30, decision 120): the
    # recipient becomes '' and the context {}, and the row keeps a keyed hash of the address
    # (core/personal_data.py) so a look-up by a known address still finds it. Both NULL until
    # then: adding them wrote no row, and a NULL costs a row one bit.
    recipient_hash = models.BinaryField(max_length=32, null=True, blank=True, editable=False)
    personal_data_removed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        # The idempotency key's unique index is each day partition's own (msg_idempotency_key_uniq
        # in delivery/partitioning.py: PostgreSQL allows a unique index on the partitioned table
        # only with the partition key in it); the accept statements check the day before.
        indexes = [
            # Claim is by primary key; recovery scans stale SENDING/QUEUED/AMBIGUOUS rows.
            models.Index(fields=["status", "claimed_at"], name="msg_status_claimed_idx"),
            # Campaign counters (GROUP BY status), pause/cancel/republish, CASCADE on delete;
            # and the log of one campaign, newest first within each status, the statuses merged
            # (decision 116): a status change re-inserts the entry anyway, created_at never moves.
            # Covering provider and sent_at, the campaign stats' grouped read of a settled
            # campaign reads no heap (an index-only scan, decision 134); both are written with
            # the status, so an update pays no entry it did not already pay.
            models.Index(F("campaign"), F("status"), F("created_at").desc(), F("id").desc(),
                         include=["provider", "sent_at"], name="msg_campaign_cover_idx"),
            # The admin's search by address, for rows of no contact; a contact's rows (every
            # fan-out row) are found through the contact, so a fan-out pays no entry (decision 64).
            models.Index(fields=["recipient"], name="msg_recipient_idx", condition=Q(contact__isnull=True)),
            # Webhooks fall back to the provider's id when an event lacks ours; empty until sent.
            models.Index(
                fields=["provider_message_id"], name="msg_provider_msgid_idx",
                condition=~Q(provider_message_id=""),
            ),
            # Cancel by key is per client; most rows (every campaign row) carry no key.
            models.Index(
                fields=["client", "cancel_key"], name="msg_client_cancel_key_idx", condition=~Q(cancel_key="")
            ),
            # A client's one-off sends still waiting for their time (GET /api/v1/schedules); only
            # those rows are in it, so it costs nothing for campaign or immediate sends.
            models.Index(
                fields=["client", "scheduled_for"], name="msg_client_scheduled_idx",
                condition=Q(status="SCHEDULED", campaign__isnull=True),
            ),
            # The message log (GET /api/v1/messages, decision 114): a service's rows newest
            # first, walked by (created_at, id) keyset for every filter without an index of its
            # own. Leading with the client, it also serves what `msg_client_idx` (which it
            # replaced, so a fan-out row pays no more entries than before) served: per-client
            # reputation counts and SET NULL when a client is deleted.
            models.Index(fields=["client", "-created_at", "-id"], name="msg_client_created_idx",
                         condition=Q(client__isnull=False)),
            # The log by recipient, any case: rows of no contact only (a campaign's rows are
            # found through their contact, msg_contact_idx), so a fan-out pays no entry.
            models.Index(F("client"), Lower("recipient"), F("created_at").desc(), F("id").desc(),
                         name="msg_client_recipient_idx", condition=Q(contact__isnull=True)),
            # The log by metadata (`metadata @> {...}`); only rows that carry metadata pay.
            GinIndex(fields=["metadata"], opclasses=["jsonb_path_ops"], name="msg_metadata_idx",
                     condition=Q(metadata__isnull=False)),
            # The orphan sweeps (decision 119): transactional rows waiting for a worker, in the
            # order the sweep ranks them. Only those rows are in it, so a campaign's QUEUED rows
            # (a million during a fan-out) cost it nothing and the sweep never walks them. Its
            # status test is the unindexed form, which the sweeps write too: they can then read
            # this index, never msg_status_claimed_idx, however stale the statistics.
            models.Index(F("priority"), Coalesce("requeued_at", "created_at").desc(), F("id").desc(),
                         name="msg_queued_txn_idx",
                         condition=Q(status__unindexed="QUEUED", campaign__isnull=True,
                                     claimed_at__isnull=True)),
            # Unsubscribe (a contact's QUEUED rows) and SET NULL when a contact is deleted.
            models.Index(fields=["contact"], name="msg_contact_idx", condition=Q(contact__isnull=False)),
            # The daily facts (decision 118): the rows sent on one day. Partial: a row enters it
            # when it is sent, so an accept or a fan-out INSERT pays nothing.
            models.Index(fields=["sent_at"], name="msg_sent_at_idx", condition=Q(sent_at__isnull=False)),
            # Personal-data removal (decision 120): per service and stream, the settled rows
            # still holding personal data, oldest first. A row enters when it settles (that
            # UPDATE already rewrites the status index entries) and leaves when it is scrubbed,
            # so the walk reads only due rows, never one twice, and no row in flight.
            models.Index(fields=["client", "stream", "created_at", "id"], name="msg_personal_due_idx",
                         condition=Q(personal_data_removed_at__isnull=True, status__in=SETTLED_STATUSES)),
            # The log by recipient for scrubbed rows of no contact, by the address's hash; only
            # scrubbed rows pay (a contact's rows are still found through the contact).
            models.Index(F("client"), F("recipient_hash"), F("created_at").desc(), F("id").desc(),
                         name="msg_client_recipient_hash_idx",
                         condition=Q(recipient_hash__isnull=False, contact__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.pk} -> {self.recipient} ({self.status})"



class DeliveryAttempt(models.Model):
    """One provider call for one message: what was tried, how long it took, what came back."""

    Outcome = Outcome  # defined once, beside the providers that produce it

    # No database constraint: a message's day is dropped whole at expiry, and its attempts'
    # days after it (decision 122). Django still cascades a deletion.
    message = models.ForeignKey(EmailMessage, on_delete=models.CASCADE, related_name="delivery_attempts",
                                db_constraint=False)
    provider = models.CharField(max_length=20)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    response_code = models.CharField(max_length=20, blank=True, default="")
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # The dashboard's provider health reads the last 15 minutes of attempts. A BRIN
            # index (a few pages per partition, next to free to keep up on an append-only table)
            # narrows that to the newest block ranges; a btree would be one more tree written
            # by every send. Summarized as ranges fill (autosummarize); the newest, unsummarized
            # ranges are always read, which is what a window ending now wants.
            BrinIndex(fields=["created_at"], name="attempt_created_brin", autosummarize=True),
        ]


class DeadLetter(models.Model):
    """A message that ran out of attempts: what it was, every attempt, and why it stopped.

    The message itself stays FAILED; `requeued_at` is set (once, under a row lock) when an admin
    or `manage.py requeue_dead_letters` sends it again, so a dead letter is requeued exactly once.
    """

    # No database constraint: expiry deletes a day's dead letters before it drops the day.
    message = models.ForeignKey(EmailMessage, on_delete=models.CASCADE, related_name="dead_letters",
                                db_constraint=False)
    payload = models.JSONField(default=dict)
    attempts = models.JSONField(default=list)
    final_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    requeued_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"dead letter {self.pk} (message {self.message_id})"


class RateLimit(models.Model):
    """A run-time override of a token bucket, editable in the admin (read through a short cache).

    `scope` is `provider` or `domain`; `name` is the provider name or the recipient domain.
    """

    class Scope(models.TextChoices):
        PROVIDER = "provider"
        DOMAIN = "domain"

    scope = models.CharField(max_length=10, choices=Scope.choices)
    name = models.CharField(max_length=255)
    per_second = models.FloatField(help_text="sustained messages per second")
    burst = models.PositiveIntegerField(default=0, help_text="bucket size; 0 means one second's worth")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "name"], name="ratelimit_scope_name_uniq")]

    def __str__(self) -> str:
        return f"{self.scope}:{self.name} {self.per_second}/s"


class AmbiguityRecord(models.Model):
    """One step in the life of an AMBIGUOUS send, with its evidence (decision 89).

    A row is written when a send becomes AMBIGUOUS (`held`, with why) and when it is settled:
    `settled` (the ESP's own record proves it took the message: an event, or its lookup),
    `resent` (its lookup has no such message, or no event came from a provider whose events
    cover later sends: it never arrived) or `requeued` (an operator said so). The message's id,
    not a foreign key: the log outlives nothing it describes and costs the send path no
    constraint check.
    """

    class Kind(models.TextChoices):
        HELD = "held"
        SETTLED = "settled"
        RESENT = "resent"
        REQUEUED = "requeued"

    message_id = models.BigIntegerField(db_index=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # held: worker_lost | no_answer | provider_raised; settled: esp_event | esp_lookup | operator;
    # resent: esp_lookup_not_found | no_event_in_window | operator_resend_enabled; requeued: operator.
    reason = models.CharField(max_length=40)
    provider = models.CharField(max_length=20, blank=True, default="")
    evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"message {self.message_id}: {self.kind} ({self.reason})"


class ProviderEventCoverage(models.Model):
    """How far a provider's event webhooks have reached: the latest hand-off instant of a message
    one of whose events has arrived from it. An AMBIGUOUS send handed over well before that
    instant, with no event of its own, is evidence the provider never took it (decision 89)."""

    provider = models.CharField(max_length=20, primary_key=True)
    sent_until = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = verbose_name_plural = "provider event coverage"

    def __str__(self) -> str:
        return f"{self.provider}: events cover sends until {self.sent_until:%Y-%m-%d %H:%M:%S}"
