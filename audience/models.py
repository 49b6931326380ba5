"""Who can be mailed: contacts, lists, segments, the suppression list, consent (streams, topics,
each recipient's choices and their history), CSV import progress.

Both campaigns (audiences, fan-out) and delivery (suppression at accept and at send) read these;
neither owns them. Emails are stored lower-cased so joins on them are exact.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import Q
from django.db.models.deletion import CASCADE, SET_NULL, Collector


class Stream(models.TextChoices):
    """What a message is to its recipient (issue 28, docs/decisions.md 106). Transactional mail
    (an OTP, a receipt, a password reset) is stopped only by an all-streams suppression (a hard
    bounce, a complaint, a legal request); broadcast mail (newsletters, campaigns) also by the
    recipient's unsubscribe from the service's broadcast stream or from the mail's topic."""

    TRANSACTIONAL = "transactional"
    BROADCAST = "broadcast"


class Contact(models.Model):
    """Someone a campaign can reach. `email` is stored lower-cased so joins are exact."""

    # The service that owns the row (decisions 50, 102); PROTECT: a service is not deleted with rows.
    # No index of its own: (client, id) and (client, email) below lead with it (a client id is
    # ~110 characters, and every index on it costs the million-row imports).
    client = models.ForeignKey("clients.Service", on_delete=models.PROTECT, related_name="+",
                               db_index=False)
    email = models.EmailField(max_length=254)
    name = models.CharField(max_length=200, blank=True, default="")
    timezone = models.CharField(max_length=64, blank=True, default="")  # IANA name
    locale = models.CharField(max_length=16, blank=True, default="")
    attributes = models.JSONField(default=dict, blank=True)
    subscribed = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["created_at"], name="contact_created_idx"),
            # The fan-out's keyset walk over one client's contacts (c.client_id = X AND c.id > N).
            models.Index(fields=["client", "id"], name="contact_client_id_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["client", "email"], name="contact_client_email_unique")
        ]

    def __str__(self) -> str:
        return self.email


class ContactList(models.Model):
    """A static audience: the contacts an operator put in it."""

    # The service that owns the row (decisions 50, 102); PROTECT: a service is not deleted with rows.
    client = models.ForeignKey("clients.Service", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    contacts = models.ManyToManyField(Contact, related_name="lists", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "name"], name="contactlist_client_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


class Segment(models.Model):
    """A dynamic audience: a filter on contact fields and attributes, evaluated in SQL."""

    # The service that owns the row (decisions 50, 102); PROTECT: a service is not deleted with rows.
    client = models.ForeignKey("clients.Service", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    definition = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "name"], name="segment_client_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


def suppressions_on_service_delete(collector: Collector, field: models.Field, sub_objs: Iterable,
                                   using: str) -> None:
    """A deleted service's suppressions: its broadcast unsubscribes go with it (they stop only
    its mail, and the check constraint wants their service), every all-streams one stays (a
    bounce or a complaint protects the sender's reputation whoever caused it), with no service."""
    if isinstance(sub_objs, models.QuerySet):  # the collector's usual case: two statements, no rows read
        broadcast, kept = (sub_objs.filter(scope=Suppression.Scope.BROADCAST),
                           sub_objs.exclude(scope=Suppression.Scope.BROADCAST))
    else:
        broadcast = [row for row in sub_objs if row.scope == Suppression.Scope.BROADCAST]
        kept = [row for row in sub_objs if row.scope != Suppression.Scope.BROADCAST]
    CASCADE(collector, field, broadcast, using)
    SET_NULL(collector, field, kept, using)


class Suppression(models.Model):
    """An address we must not mail (until an operator removes it), in a scope.

    `scope` ALL (a hard bounce, a complaint, an operator's or a legal request) stops every
    message from every service: every service sends from the same sender reputation. `client`
    is then the service whose mail or request caused it (None for an operator's import): only
    that service (or the admin scope) lists it and may remove it, so no service reads another's
    recipients or lifts a bounce another service's mail caused.
    `scope` BROADCAST is an unsubscribe from one service's broadcast stream (`client`): it stops
    that service's broadcast mail only, never a transactional message, never another service's.
    A test key's messages have suppressions of their own (`sandbox`), one scope apart.
    """

    class Reason(models.TextChoices):
        HARD_BOUNCE = "hard_bounce"
        COMPLAINT = "complaint"
        UNSUBSCRIBE = "unsubscribe"
        MANUAL = "manual"

    class Scope(models.TextChoices):
        ALL = "all", "all streams"
        BROADCAST = "broadcast", "the service's broadcast stream"

    email = models.EmailField(max_length=254)
    reason = models.CharField(max_length=20, choices=Reason.choices, default=Reason.MANUAL)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.ALL, db_default=Scope.ALL)
    # Caused by a test key's message (issue 27): it stops only test sends, never a live one,
    # and a live suppression never stops a test send (the test key's data is its own).
    sandbox = models.BooleanField(default=False, db_default=False)
    source = models.CharField(max_length=100, blank=True, default="")
    client = models.ForeignKey("clients.Service", null=True, blank=True,
                               on_delete=suppressions_on_service_delete, related_name="+", db_index=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # One row per address and scope; each unique index is also the lookup of its scope (the
        # send path's EXISTS and the fan-out's anti-join name all its columns and its condition).
        constraints = [
            models.UniqueConstraint(fields=["email", "sandbox"], condition=Q(scope="all"),
                                    name="suppression_all_streams_uniq"),
            models.UniqueConstraint(fields=["email", "sandbox", "client"], condition=Q(scope="broadcast"),
                                    name="suppression_broadcast_uniq"),
            models.CheckConstraint(condition=Q(scope="all") | Q(client__isnull=False),
                                   name="suppression_broadcast_has_service"),
        ]
        # A service's own suppressions, in the API's keyset order (email).
        indexes = [models.Index(fields=["client", "email"], name="suppression_client_email_idx")]

    def __str__(self) -> str:
        return self.email


class Topic(models.Model):
    """What a service's broadcast mail is about ("Product news", "Weekly digest"), which a
    recipient may leave or join on its own. A contact's choice is a TopicSubscription; with none,
    `default_subscribed` decides. Never deleted while mail may name it: archived instead, so a
    campaign or a link that names it keeps its meaning."""

    client = models.ForeignKey("clients.Service", on_delete=models.PROTECT, related_name="+", db_index=False)
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    default_subscribed = models.BooleanField(default=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["client", "name"], name="topic_client_name_unique")]

    def __str__(self) -> str:
        return self.name


class TopicSubscription(models.Model):
    """One recipient's own choice for one topic, by address (lower-cased, as contacts and
    suppressions): a recipient of a one-off broadcast send need not be a contact. Only rows that
    someone chose exist; the fan-out's anti-join probes (topic, email), the unique index."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="+", db_index=False)
    email = models.EmailField(max_length=254)
    subscribed = models.BooleanField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["topic", "email"], name="topic_subscription_unique")]


class ConsentChange(models.Model):
    """One change of a recipient's subscription state, with where it came from: the history
    `GET /api/v1/contacts/{id}/preferences` shows, and the per-topic unsubscribe counts of a
    campaign (`campaign_id`: the mail whose link was used; a plain column, campaigns sit above)."""

    class Source(models.TextChoices):
        LINK = "link", "one-click link"
        PREFERENCE_PAGE = "preference_page", "preference page"
        API = "api", "API"
        ESP_EVENT = "esp_event", "ESP event"
        IMPORT = "import", "import"
        OPERATOR = "operator", "operator"

    client = models.ForeignKey("clients.Service", on_delete=models.CASCADE, related_name="+", db_index=False)
    email = models.EmailField(max_length=254)
    topic = models.ForeignKey(Topic, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                              db_index=False)  # None: the whole broadcast stream
    subscribed = models.BooleanField()  # the state after the change
    source = models.CharField(max_length=20, choices=Source.choices)
    campaign_id = models.BigIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["client", "email", "occurred_at"], name="consent_change_history_idx"),
            models.Index(fields=["campaign_id", "topic"], name="consent_change_campaign_idx",
                         condition=Q(campaign_id__isnull=False)),
        ]


class ContactImport(models.Model):
    """Progress of one CSV import, so an interrupted `import_contacts` resumes where it stopped."""

    path = models.CharField(max_length=1000)
    fingerprint = models.CharField(max_length=200, unique=True)  # path + size + mtime
    list_name = models.CharField(max_length=200, blank=True, default="")
    rows_done = models.BigIntegerField(default=0)
    finished = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)


