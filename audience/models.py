"""Who can be mailed: contacts, lists, segments, the suppression list, CSV import progress.

Both campaigns (audiences, fan-out) and delivery (suppression at accept and at send) read these;
neither owns them. Emails are stored lower-cased so joins on them are exact.
"""

from __future__ import annotations

from django.db import models


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


class Suppression(models.Model):
    """An address we must never mail again (until an operator removes it).

    Platform-wide: every client sends from the same sender reputation, so a suppression stops
    mail from every client. `client` is the client whose mail or request caused it (None for
    an operator's import): only that client (or the admin scope) lists it and may remove it,
    so no client reads another's recipients or lifts a bounce another client's mail caused.
    A test key's messages have suppressions of their own (`sandbox`), one scope apart.
    """

    class Reason(models.TextChoices):
        HARD_BOUNCE = "hard_bounce"
        COMPLAINT = "complaint"
        UNSUBSCRIBE = "unsubscribe"
        MANUAL = "manual"

    email = models.EmailField(max_length=254)
    reason = models.CharField(max_length=20, choices=Reason.choices, default=Reason.MANUAL)
    # Caused by a test key's message (issue 27): it stops only test sends, never a live one,
    # and a live suppression never stops a test send (the test key's data is its own).
    sandbox = models.BooleanField(default=False, db_default=False)
    source = models.CharField(max_length=100, blank=True, default="")
    client = models.ForeignKey("clients.Service", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+", db_index=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # A client's own suppressions, in the API's keyset order (email).
        # (email, sandbox): every match names both, so the one index answers it (the send
        # path's EXISTS, the fan-out's anti-join).
        constraints = [
            models.UniqueConstraint(fields=["email", "sandbox"], name="suppression_email_scope_uniq"),
        ]
        indexes = [models.Index(fields=["client", "email"], name="suppression_client_email_idx")]

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


