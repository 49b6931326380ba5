from django.contrib import admin

from campaigns.models import Campaign, Suppression


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "priority", "created_at"]
    list_filter = ["status", "priority"]
    raw_id_fields = ["template_version", "client"]


@admin.register(Suppression)
class SuppressionAdmin(admin.ModelAdmin):
    list_display = ["email", "reason", "source", "created_at"]
    list_filter = ["reason"]
    search_fields = ["email"]
