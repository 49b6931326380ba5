"""Admin helpers for tables with millions of rows; adopt them in one line:

    @admin.register(EmailMessage)
    class EmailMessageAdmin(LargeTableAdmin):
        ...

Django's changelist runs COUNT(*) twice per page (filtered and, for "N of M", unfiltered); on a
10M-row table each is seconds. `LargeTablePaginator` takes PostgreSQL's planner estimate
(pg_class.reltuples) for an unfiltered list and a capped count for a filtered one, and the
admin hides the full result count. Keep filters on indexed columns and use raw_id_fields for
foreign keys to big tables (a <select> would load every row).
"""

from __future__ import annotations

from functools import cached_property

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections

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
