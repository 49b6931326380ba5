"""Operators' views of the daily facts (decision 118): written only by the facts writer
(`manage.py write_facts`, the periodic run), read-only here (`SystemWrittenAdmin`)."""

from __future__ import annotations

from django.contrib import admin

from analytics.models import DayFact, EndedCampaignCounts, FactsDay
from core.admin_tools import SystemWrittenAdmin


@admin.register(FactsDay)
class FactsDayAdmin(SystemWrittenAdmin):
    list_display = ["day", "written_at", "rows", "seconds"]
    date_hierarchy = "day"


@admin.register(DayFact)
class DayFactAdmin(SystemWrittenAdmin):
    list_display = ["day", "service_id", "template_id", "campaign_id", "stream", "topic_id", "key_type",
                    "sent", "delivered", "opened", "clicked", "bounced", "complained", "unsubscribed",
                    "failed", "suppressed"]
    list_filter = ["key_type", "stream"]
    search_fields = ["=service_id"]
    date_hierarchy = "day"


@admin.register(EndedCampaignCounts)
class EndedCampaignCountsAdmin(SystemWrittenAdmin):
    list_display = ["campaign_id", "counted_at", "by_status", "sent_by_provider"]
    search_fields = ["=campaign_id"]
