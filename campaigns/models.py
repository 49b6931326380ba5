"""Contacts, lists, segments, campaigns and the suppression list.

A campaign keeps a snapshot of its audience (`audience`) and schedule so a fan-out restarted
hours later resolves the same audience; `fanout_cursor` is the last contact id the fan-out has
written messages for, which makes the fan-out resumable chunk by chunk; `audience_size` is how
many recipients the fan-out resolves the audience to, the denominator of every progress figure.
"""

from __future__ import annotations

from django.db import models

from core.priorities import Priority


class Contact(models.Model):
    """Someone a campaign can reach. `email` is stored lower-cased so joins are exact."""

    email = models.EmailField(max_length=254, unique=True)
    name = models.CharField(max_length=200, blank=True, default="")
    timezone = models.CharField(max_length=64, blank=True, default="")  # IANA name
    locale = models.CharField(max_length=16, blank=True, default="")
    attributes = models.JSONField(default=dict, blank=True)
    subscribed = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="contact_created_idx")]

    def __str__(self) -> str:
        return self.email


class ContactList(models.Model):
    """A static audience: the contacts an operator put in it."""

    name = models.CharField(max_length=200, unique=True)
    contacts = models.ManyToManyField(Contact, related_name="lists", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Segment(models.Model):
    """A dynamic audience: a filter on contact fields and attributes, evaluated in SQL."""

    name = models.CharField(max_length=200, unique=True)
    definition = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "DRAFT"
        SCHEDULED = "SCHEDULED"
        QUEUED = "QUEUED"
        SENDING = "SENDING"
        PAUSED = "PAUSED"
        COMPLETED = "COMPLETED"
        CANCELLED = "CANCELLED"
        FAILED = "FAILED"

    name = models.CharField(max_length=200)
    external_id = models.CharField(max_length=200, blank=True, default="")
    client = models.ForeignKey("clients.ApiClient", null=True, blank=True, on_delete=models.SET_NULL)
    template_version = models.ForeignKey("templates.TemplateVersion", on_delete=models.PROTECT)
    priority = models.PositiveSmallIntegerField(
        choices=[(p.value, p.label) for p in Priority], default=Priority.NORMAL
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    metadata = models.JSONField(default=dict, blank=True)
    # Snapshot of the request's recipients (segment definition copied in) and schedule.
    audience = models.JSONField(default=dict, blank=True)
    schedule = models.JSONField(default=dict, blank=True)
    # Where a paused campaign goes back to on resume.
    resume_status = models.CharField(max_length=16, blank=True, default="")
    # Fan-out progress: last contact id written; contacts skipped (suppressed/unsubscribed).
    fanout_cursor = models.BigIntegerField(default=0)
    fanout_done = models.BooleanField(default=False)
    excluded_count = models.PositiveIntegerField(default=0)
    # Recipients the campaign will have when its fan-out completes (messages written plus
    # contacts excluded): counted once when the fan-out starts, made exact when it finishes, so
    # progress is measured against the whole audience, not the rows written so far. NULL until
    # the fan-out starts.
    audience_size = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["client", "external_id"],
                condition=~models.Q(external_id=""),
                name="campaign_client_external_id_unique",
            )
        ]

    def __str__(self) -> str:
        return self.name


class Suppression(models.Model):
    """An address we must never mail again (until an operator removes it)."""

    class Reason(models.TextChoices):
        HARD_BOUNCE = "hard_bounce"
        COMPLAINT = "complaint"
        UNSUBSCRIBE = "unsubscribe"
        MANUAL = "manual"

    email = models.EmailField(max_length=254, unique=True)
    reason = models.CharField(max_length=20, choices=Reason.choices, default=Reason.MANUAL)
    source = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.email


class ContactImport(models.Model):
    """Progress of one CSV import, so an interrupted `import_contacts` resumes where it stopped."""

    path = models.CharField(max_length=1000)
    fingerprint = models.CharField(max_length=200, unique=True)  # path + size + mtime
    list_name = models.CharField(max_length=200, blank=True, default="")
    rows_done = models.BigIntegerField(default=0)
    finished = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
