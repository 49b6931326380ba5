"""Schedules an operator can see, pause, resume and cancel.

A recurring schedule is stored next to a django-celery-beat PeriodicTask + CrontabSchedule, so
it shows (and can be toggled) in the admin's "Periodic tasks"; each beat fire runs
`scheduling.run_recurring(schedule_id)`, which creates a new campaign run from `definition`.
One-off campaign schedules (scheduled / local_time / optimal) are recorded here too so the
schedules API can list them with their pending count; their messages wait in the due set.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from clients.key_types import KeyType

# A schedule whose stored definition still holds inline addresses and can never fire again
# (cancelled: its beat task is gone and a run claims only an ACTIVE schedule): the rows of
# `schedule_personal_due_idx`, which the personal-data step reads (decision 132).
PERSONAL_DUE = Q(personal_data_removed_at__isnull=True, status="cancelled",
                 definition__recipients__type="inline")


class Schedule(models.Model):
    class Type(models.TextChoices):
        RECURRING = "recurring"
        SCHEDULED = "scheduled"
        LOCAL_TIME = "local_time"
        OPTIMAL = "optimal"

    class Status(models.TextChoices):
        ACTIVE = "active"
        PAUSED = "paused"
        CANCELLED = "cancelled"

    client = models.ForeignKey("clients.Service", null=True, blank=True, on_delete=models.SET_NULL)
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=16, choices=Type.choices)
    cron = models.CharField(max_length=120, blank=True, default="")
    timezone = models.CharField(max_length=64, default="UTC")
    # The campaign to create on each run (passed to campaigns.services.launch.campaign_launch).
    definition = models.JSONField(default=dict, blank=True)
    # The one-off campaign, or the campaign created by the latest recurring run.
    campaign = models.ForeignKey(
        "campaigns.Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="schedules"
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    # The type of the key that created it: each recurring run launches its campaign with it.
    key_type = models.CharField(max_length=4, choices=KeyType.choices, default=KeyType.LIVE,
                                db_default=KeyType.LIVE)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    last_run = models.DateTimeField(null=True, blank=True)
    next_run = models.DateTimeField(null=True, blank=True)
    runs = models.PositiveIntegerField(default=0)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # When it was cancelled (schedule_cancel): the clock of its personal-data retention. Older
    # cancelled rows have none and fall back on `updated_at` (decision 132).
    cancelled_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When its definition's inline addresses were removed (scheduling/personal_data.py).
    personal_data_removed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        indexes = [
            models.Index(fields=["client", "status"], name="schedule_client_status_idx"),
            models.Index(Coalesce("cancelled_at", "updated_at"), F("id"), name="schedule_personal_due_idx",
                         condition=PERSONAL_DUE),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.type}, {self.status})"
