"""Admin helpers for tables with millions of rows; adopt them in one line:

    @admin.register(EmailMessage)
    class EmailMessageAdmin(LargeTableAdmin):
        ...

Django's changelist runs COUNT(*) twice per page (filtered and, for "N of M", unfiltered); on a
10M-row table each is seconds. `LargeTablePaginator` takes PostgreSQL's planner estimate
(pg_class.reltuples) for an unfiltered list and a capped count for a filtered one, and the
admin hides the full result count. Either figure is shown as what it is, "about 120,000" or
"more than 10,000", never as an exact count (`count_label`, read by the admin templates in
notifier/templates/admin/). Keep filters on indexed columns and use raw_id_fields for
foreign keys to big tables (a <select> would load every row).

Search fields marked `=` are exact matches served by the column's btree index: Django's own `=`
is `iexact`, `UPPER(col) = UPPER(term)`, which no plain index serves (a sequential scan of every
row, measured on the message table: decision 64). Here it is `col IN (term, lower(term))`:
addresses are stored as given or, for contacts, lower-cased.

`SystemWrittenAdmin` is for tables only the system writes (the ledger, events, counters): it
shows them and offers the operator actions the admin declares, each going through a service,
and never a form that would write a row around the services.
"""

from __future__ import annotations

from functools import cached_property

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest

COUNT_CAP = 10_000


class LargeTablePaginator(Paginator):
    @cached_property
    def _counted(self) -> tuple[int, str]:
        """(count, how it was found: "exact", "estimate" or "at_least")."""
        queryset = self.object_list
        query = getattr(queryset, "query", None)
        if query is None:
            return len(queryset), "exact"
        if not query.where:
            estimate = _estimated_rows(queryset.db, queryset.model._meta.db_table)
            if estimate > COUNT_CAP:
                return estimate, "estimate"
        # A filtered list: count at most COUNT_CAP + 1 rows (the last page link is approximate).
        capped = queryset.order_by()[: COUNT_CAP + 1].count()
        return capped, "at_least" if capped > COUNT_CAP else "exact"

    @property
    def count(self) -> int:
        return self._counted[0]

    @property
    def count_label(self) -> str:
        """The count as the admin shows it: empty when it is exact (the admin's own figure)."""
        count, kind = self._counted
        if kind == "estimate":
            return f"about {_two_significant_digits(count):,}"
        if kind == "at_least":
            return f"more than {COUNT_CAP:,}"
        return ""


def _two_significant_digits(n: int) -> int:
    """10,004 -> 10,000; 1,234,567 -> 1,200,000: an estimate's digits beyond these are noise."""
    return round(n, 2 - len(str(n))) if n >= 100 else n


def _estimated_rows(alias: str, table: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)", [table])
        row = cursor.fetchone()
    return max(int(row[0]), 0) if row and row[0] is not None else 0


class NeverWritten:
    """Admin permissions of rows only the system writes: shown, never added, edited or deleted
    here (a form save or a delete would change the ledger behind its guarded services). For a
    ModelAdmin (SystemWrittenAdmin) and for inlines alike."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class SystemWrittenAdmin(NeverWritten, admin.ModelAdmin):
    """Operator actions declare `allowed_permissions = ("operate",)`: they need the model's
    change permission, which the forms still never get."""

    def has_operate_permission(self, request: HttpRequest) -> bool:
        # The model's own change permission (ModelAdmin's), past NeverWritten's refusal.
        return admin.ModelAdmin.has_change_permission(self, request)


class LargeTableAdmin(admin.ModelAdmin):
    paginator = LargeTablePaginator
    show_full_result_count = False
    list_per_page = 50

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """Exact-only search fields as indexed `IN (term, lower(term))` lookups, OR-ed; any
        other search (a non-exact field scans anyway) is Django's."""
        fields = self.get_search_fields(request)
        term = search_term.strip()
        if not term or not fields or not all(field.startswith("=") for field in fields):
            return super().get_search_results(request, queryset, search_term)
        values = list(dict.fromkeys([term, term.lower()]))
        match = Q()
        for field in fields:
            match |= self.exact_match(field[1:], values)
        return queryset.filter(match), False

    def exact_match(self, field: str, values: list[str]) -> Q:
        """The rows whose `field` is one of `values` (a subclass may route a field elsewhere)."""
        return Q(**{f"{field}__in": values})
