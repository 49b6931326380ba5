"""Admin for campaigns.

Nothing here loads a large table: lists use an estimated count (pg_class.reltuples) instead of
COUNT(*), contact lists never render their members, and a campaign's per-status counts are one
GROUP BY on its change page only. Actions call the same lifecycle services as the API.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from campaigns.models import Campaign
from campaigns.selectors import campaign_counters
from campaigns.services import lifecycle
from clients.models import Service


def _run_action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, service, verb: str):
    for campaign_id in queryset.values_list("id", flat=True)[:100]:
        try:
            service(campaign_id=campaign_id)
            modeladmin.message_user(request, f"Campaign {campaign_id}: {verb}.")
        except lifecycle.IllegalTransitionError as exc:
            modeladmin.message_user(request, f"Campaign {campaign_id}: {exc}", level=messages.WARNING)


@admin.action(description="Pause selected campaigns")
def pause(modeladmin, request, queryset) -> None:
    _run_action(modeladmin, request, queryset, lifecycle.campaign_pause, "paused")


@admin.action(description="Resume selected campaigns")
def resume(modeladmin, request, queryset) -> None:
    _run_action(modeladmin, request, queryset, lifecycle.campaign_resume, "resumed")


@admin.action(description="Cancel selected campaigns")
def cancel(modeladmin, request, queryset) -> None:
    _run_action(modeladmin, request, queryset, lifecycle.campaign_cancel, "cancelled")


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "status", "priority", "fanout_done", "created_at", "completed_at"]
    list_filter = ["status", "priority"]
    search_fields = ["=id", "name", "external_id"]
    raw_id_fields = ["template_version", "client"]
    actions = [pause, resume, cancel]
    readonly_fields = ["progress", "status", "fanout_cursor", "fanout_done", "excluded_count",
                       "audience_size", "started_at", "completed_at", "audience_summary",
                       "personal_data_removed_at"]
    exclude = ["audience"]

    @admin.display(description="Per-status counts")
    def progress(self, campaign: Campaign) -> str:
        if not campaign.pk:
            return "-"
        counters = campaign_counters(campaign=campaign)
        total = counters["total"] or 1
        rows = [(name, value) for name, value in counters.items() if value]
        table = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
        percent = round(100 * counters["done"] / total)
        return format_html_join("", "<p>{}% done</p><table>{}</table>", [(percent, table)])

    @admin.display(description="Audience")
    def audience_summary(self, campaign: Campaign) -> str:
        """What the audience is, in words. `client_id` is an API key's id, which holds the key's
        stored hash (djangorestframework-api-key): shown as the client's name, never as is."""
        audience = dict(campaign.audience or {})
        owner = _client_name(audience.pop("client_id", None))
        kind = audience.get("type", "")
        if kind == "inline" and campaign.personal_data_removed_at:
            # Its rows were removed after the retention (decision 130); the count stays.
            removed = campaign.personal_data_removed_at.date().isoformat()
            what = f"inline: {audience.get('count', 0)} contacts (addresses removed {removed})"
        elif kind == "inline":
            what = f"inline: {len(audience.get('contacts', []))} contacts"
        else:
            what = ", ".join(f"{k}={v}" for k, v in audience.items() if k not in ("definition", "contacts"))
        return f"{what}; contacts of {owner}" if owner else what


def _client_name(client_id: object) -> str:
    if not client_id:
        return ""
    name = Service.objects.filter(pk=client_id).values_list("name", flat=True).first()
    return f"service {name!r}" if name is not None else "a deleted service"
