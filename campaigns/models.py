"""Campaigns and the suppression list (first cut; the campaign issue extends them)."""

from __future__ import annotations

from django.db import models

from notifier.priorities import Priority


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
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

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
