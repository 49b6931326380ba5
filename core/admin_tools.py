"""Admin helpers for tables with millions of rows; adopt them in one line:

    @admin.register(EmailMessage)
    class EmailMessageAdmin(LargeTableAdmin):
        ...

Django's changelist runs COUNT(*) twice per page (filtered and, for "N of M", unfiltered); on a
10M-row table each is seconds. `LargeTablePaginator` takes PostgreSQL's planner estimate
(pg_class.reltuples) for an unfiltered list and a capped count for a filtered one, and the
admin hides the full result count. Keep filters on indexed columns and use raw_id_fields for
foreign keys to big tables (a <select> would load every row).

Search fields marked `=` are exact matches served by the column's btree index: Django's own `=`
is `iexact`, `UPPER(col) = UPPER(term)`, which no plain index serves (a sequential scan of every
row, measured on the message table: decision 64). Here it is `col IN (term, lower(term))`:
addresses are stored as given or, for contacts, lower-cased.
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
    def count(self) -> int:
        queryset = self.object_list
        query = getattr(queryset, "query", None)
        if query is None:
            return len(queryset)
        if not query.where:
            estimate = _estimated_rows(queryset.db, queryset.model._meta.db_table)
            if estimate > COUNT_CAP:
                return estimate
        # A filtered list: count at most COUNT_CAP + 1 rows (the last page link is approximate).
        return queryset.order_by()[: COUNT_CAP + 1].count()


def _estimated_rows(alias: str, table: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)", [table])
        row = cursor.fetchone()
    return max(int(row[0]), 0) if row and row[0] is not None else 0


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
