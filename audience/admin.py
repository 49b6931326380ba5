"""Admin for contacts, lists, segments and suppressions.

Nothing here loads a large table: lists use an estimated count (pg_class.reltuples) instead of
COUNT(*) and contact lists never render their members.
"""

from __future__ import annotations

from django.contrib import admin

from audience.models import Contact, ContactList, Segment, Suppression
from core.admin_tools import LargeTablePaginator


@admin.register(Contact)
class ContactAdmin(admin.ModelAdmin):
    list_display = ["email", "client", "name", "timezone", "subscribed", "created_at"]
    raw_id_fields = ["client"]
    search_fields = ["=email"]  # exact: an index lookup, not a scan of a million rows
    paginator = LargeTablePaginator
    show_full_result_count = False
    list_filter = ["subscribed"]


@admin.register(ContactList)
class ContactListAdmin(admin.ModelAdmin):
    list_display = ["name", "client", "created_at"]
    raw_id_fields = ["client"]
    exclude = ["contacts"]  # a million members are managed by import/bulk API, not a widget


@admin.register(Segment)
class SegmentAdmin(admin.ModelAdmin):
    list_display = ["name", "client", "created_at"]
    raw_id_fields = ["client"]


@admin.register(Suppression)
class SuppressionAdmin(admin.ModelAdmin):
    list_display = ["email", "reason", "sandbox", "source", "created_at"]
    list_filter = ["reason", "sandbox"]
    search_fields = ["=email"]
    paginator = LargeTablePaginator
    show_full_result_count = False
