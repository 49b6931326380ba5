"""Admin for contacts, lists, segments, suppressions and consent (topics, the history).

Nothing here loads a large table: lists use an estimated count (pg_class.reltuples) instead of
COUNT(*) and contact lists never render their members. Topics are archived, never deleted (a
campaign or a message may name one); the consent history is read-only (each row is what a
recipient or a service did).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from audience.models import ConsentChange, Contact, ContactList, Segment, Suppression, Topic
from audience.topics import broadcast_suppressed, consent_history, topic_states
from core.admin_tools import LargeTableAdmin, LargeTablePaginator, NeverWritten

CONTACT_HISTORY_ROWS = 20


@admin.register(Contact)
class ContactAdmin(admin.ModelAdmin):
    list_display = ["email", "client", "name", "timezone", "subscribed", "created_at"]
    raw_id_fields = ["client"]
    search_fields = ["=email"]  # exact: an index lookup, not a scan of a million rows
    paginator = LargeTablePaginator
    show_full_result_count = False
    list_filter = ["subscribed"]
    readonly_fields = ["broadcast_stream", "topic_choices", "consent_changes"]

    @admin.display(description="broadcast stream")
    def broadcast_stream(self, contact: Contact) -> str:
        if contact.pk is None:
            return "-"
        left = not contact.subscribed or broadcast_suppressed(service_id=contact.client_id,
                                                              email=contact.email)
        return "left (no campaign or broadcast send reaches it)" if left else "subscribed"

    @admin.display(description="topics")
    def topic_choices(self, contact: Contact) -> SafeString | str:
        """Each topic of the contact's service: subscribed or not, their own choice or the default."""
        if contact.pk is None:
            return "-"
        states = topic_states(service_id=contact.client_id, email=contact.email)
        if not states:
            return "the service has no topics"
        return _table(["topic", "subscribed", "by"], (
            (state.topic.name, "yes" if state.subscribed else "no",
             "their choice" if state.chosen else "default")
            for state in states))

    @admin.display(description=f"consent history (latest {CONTACT_HISTORY_ROWS})")
    def consent_changes(self, contact: Contact) -> SafeString | str:
        if contact.pk is None:
            return "-"
        changes = consent_history(service_id=contact.client_id, email=contact.email,
                                  limit=CONTACT_HISTORY_ROWS)
        if not changes:
            return "no change recorded"
        return _table(["when", "what", "now", "source", "campaign"], (
            (f"{change.occurred_at:%Y-%m-%d %H:%M:%S}",
             change.topic.name if change.topic else "broadcast stream",
             "subscribed" if change.subscribed else "unsubscribed", change.get_source_display(),
             change.campaign_id or "")
            for change in changes))


def _table(header: list[str], rows: object) -> SafeString:
    head = format_html_join("", "<th>{}</th>", ((name,) for name in header))
    body = format_html_join("", "<tr>{}</tr>", (
        (format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows))
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


class TopicForm(forms.ModelForm):
    class Meta:
        model = Topic
        fields = ["client", "name", "description", "default_subscribed"]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name.isascii() and name.isdigit():
            raise forms.ValidationError("A topic's name is not digits only: a send names a topic by id "
                                        "or name.")
        return name


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    form = TopicForm
    list_display = ["name", "client", "default_subscribed", "archived_at", "created_at"]
    list_filter = ["client", ("archived_at", admin.EmptyFieldListFilter), "default_subscribed"]
    search_fields = ["name"]
    raw_id_fields = ["client"]
    readonly_fields = ["archived_at", "created_at"]
    actions = ["archive"]

    def get_readonly_fields(self, request: HttpRequest, obj: Topic | None = None) -> list[str]:
        # A topic's service is fixed once created: its choices and history are that service's.
        return [*self.readonly_fields, "client"] if obj is not None else list(self.readonly_fields)

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # archived instead: campaigns, messages and the history name it

    @admin.action(description="Archive the selected topics (no new send or choice may name them)")
    def archive(self, request: HttpRequest, queryset: QuerySet[Topic]) -> None:
        count = queryset.filter(archived_at__isnull=True).update(archived_at=timezone.now())
        self.message_user(request, f"{count} topic(s) archived.", messages.SUCCESS)


@admin.register(ConsentChange)
class ConsentChangeAdmin(NeverWritten, LargeTableAdmin):
    list_display = ["occurred_at", "email", "client", "topic", "subscribed", "source", "campaign_id"]
    list_filter = ["source", "subscribed"]
    search_fields = ["=email"]
    list_select_related = ["client", "topic"]


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
