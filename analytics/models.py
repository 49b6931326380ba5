"""The daily facts (issue 30, decision 118): what the statistics of a day were, kept for good.

Message rows and their events are kept for the metadata retention only (analytics/horizon.py);
a day's counts are written here as days close (analytics/services/facts.py), so the statistics
API and the dashboard answer older ranges from these rows. The dimensions are plain ids, never
foreign keys: deleting a service, a campaign or their messages must not delete (or lock) a fact.
"""

from __future__ import annotations

from django.db import models

COUNTERS = ("sent", "delivered", "opened", "clicked", "bounced", "soft_bounced", "complained",
            "unsubscribed", "failed", "suppressed")
DIMENSIONS = ("service_id", "day", "template_id", "campaign_id", "stream", "topic_id", "key_type")


class DayFact(models.Model):
    """One UTC day of one service's mail of one template, campaign (or none), stream, topic (or
    none) and key type. Each counter counts messages, each once per kind: `sent` on the day it
    was sent, `delivered` ... `unsubscribed` on the day of its first such event (the unique
    counts the campaign statistics answer), `failed` and `suppressed` on the day its send was
    decided (its last claim, else its creation)."""

    service_id = models.CharField(max_length=150)
    day = models.DateField()
    template_id = models.BigIntegerField()
    campaign_id = models.BigIntegerField(null=True, blank=True)
    stream = models.CharField(max_length=13)
    topic_id = models.BigIntegerField(null=True, blank=True)
    key_type = models.CharField(max_length=4)
    sent = models.IntegerField(default=0)
    delivered = models.IntegerField(default=0)
    opened = models.IntegerField(default=0)
    clicked = models.IntegerField(default=0)
    bounced = models.IntegerField(default=0)  # hard bounces, as the campaign statistics count them
    soft_bounced = models.IntegerField(default=0)
    complained = models.IntegerField(default=0)
    unsubscribed = models.IntegerField(default=0)  # the message's link or an ESP's event (decision 143)
    failed = models.IntegerField(default=0)
    suppressed = models.IntegerField(default=0)
    written_at = models.DateTimeField()

    class Meta:
        constraints = [
            # The upsert's arbiter. NULLS NOT DISTINCT: a row of no campaign or no topic is one
            # row, so writing a day again updates it instead of adding another.
            models.UniqueConstraint(fields=list(DIMENSIONS), name="dayfact_dimensions_uniq",
                                    nulls_distinct=False),
        ]
        indexes = [
            # The dashboard's days of every service, and a day's rewrite.
            models.Index(fields=["day"], name="dayfact_day_idx"),
            # A campaign's days.
            models.Index(fields=["campaign_id", "day"], name="dayfact_campaign_day_idx",
                         condition=models.Q(campaign_id__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.service_id} {self.day} template {self.template_id}: {self.sent} sent"


class FactsDay(models.Model):
    """A UTC day whose facts were written (after it closed, or today so far): the reads take such
    a day from the facts, any other day from the message rows. `written_at` before the day's end:
    today's figures as of then."""

    day = models.DateField(primary_key=True)
    written_at = models.DateTimeField()
    rows = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0.0)

    class Meta:
        verbose_name = "facts day"

    def __str__(self) -> str:
        return f"{self.day} written {self.written_at:%Y-%m-%d %H:%M} ({self.rows} rows)"


class EndedCampaignCounts(models.Model):
    """An ended campaign's message rows, grouped as its statistics read them (decisions 140, 141):
    per status (the dashboard's counts for the 24 h after its end), and the sent ones per provider
    and per UTC minute of `sent_at`. Counted by the beat for the campaigns the dashboard shows and
    by the statistics API for the others (analytics.services.ended_campaigns), so a dashboard
    refresh or a stats request reads this row instead of counting a million-row campaign. A plain
    id, as the facts: a campaign deleted leaves a row the beat removes within the hour."""

    campaign_id = models.BigIntegerField(primary_key=True)
    by_status = models.JSONField(default=dict)
    # null: counted per status only (a row written before decision 141): the stats count the rows.
    sent_by_provider = models.JSONField(null=True, blank=True)
    sent_by_minute = models.JSONField(null=True, blank=True, help_text="{ISO UTC minute: sent}")
    counted_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "ended campaign counts"

    def __str__(self) -> str:
        return f"campaign {self.campaign_id} counted {self.counted_at:%Y-%m-%d %H:%M:%S}"
