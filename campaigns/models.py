"""Campaigns: one send of a template to an audience (audience.models holds who).

A campaign keeps a snapshot of its audience (`audience`) and schedule so a fan-out restarted
hours later resolves the same audience; `fanout_cursor` is the last contact id the fan-out has
written messages for, which makes the fan-out resumable chunk by chunk; `audience_size` is how
many recipients the fan-out resolves the audience to, the denominator of every progress figure.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce

from clients.key_types import KeyType
from core.priorities import Priority

# A campaign in one of these never fans out again: nothing resumes, cancels or fails it
# (campaigns.services.lifecycle; the fan-out's `_start` returns at once for them).
ENDED_STATUSES = ("COMPLETED", "CANCELLED", "FAILED")
# What the personal-data removal of campaigns picks (decision 130): its partial index's predicate.
PERSONAL_DUE = Q(personal_data_removed_at__isnull=True, status__in=ENDED_STATUSES, audience__type="inline")


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
    client = models.ForeignKey("clients.Service", null=True, blank=True, on_delete=models.SET_NULL)
    template_version = models.ForeignKey("templates.TemplateVersion", on_delete=models.PROTECT)
    priority = models.PositiveSmallIntegerField(
        choices=[(p.value, p.label) for p in Priority], default=Priority.NORMAL
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    # The type of the key that launched it; every message of its fan-out inherits it (issue 27).
    key_type = models.CharField(max_length=4, choices=KeyType.choices, default=KeyType.LIVE,
                                db_default=KeyType.LIVE)
    # What the campaign is about (issue 28): recipients who left the topic are skipped, its
    # one-click link leaves that topic only. None: the service's broadcast stream as a whole.
    topic = models.ForeignKey("audience.Topic", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+")
    metadata = models.JSONField(default=dict, blank=True)
    # Snapshot of the request's recipients (segment definition copied in) and schedule.
    audience = models.JSONField(default=dict, blank=True)
    schedule = models.JSONField(default=dict, blank=True)
    # Where a paused campaign goes back to on resume.
    resume_status = models.CharField(max_length=16, blank=True, default="")
    # Fan-out progress: last contact id written; contacts skipped (suppressed/unsubscribed).
    fanout_cursor = models.BigIntegerField(default=0)
    # The parallel fan-out's disjoint contact-id ranges, [[cursor, upper], ...]: each range is
    # written by its own connection and resumes from its own cursor (decision 58). Empty until
    # a fan-out starts; `fanout_cursor` then holds the highest cursor of any range.
    fanout_ranges = models.JSONField(default=list, blank=True)
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
    # When an ended inline campaign's addresses were removed from `audience` after its service's
    # broadcast personal-data retention (decision 130); NULL: never (or not inline).
    personal_data_removed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        indexes = [
            # The ended inline campaigns still holding their addresses, by end (decision 130):
            # a scrubbed campaign leaves it, so the removal walks only what is left to do.
            models.Index(Coalesce("completed_at", "created_at"), "id", name="campaign_personal_due_idx",
                         condition=PERSONAL_DUE),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "external_id"],
                condition=~models.Q(external_id=""),
                name="campaign_client_external_id_unique",
            )
        ]

    def __str__(self) -> str:
        return self.name
