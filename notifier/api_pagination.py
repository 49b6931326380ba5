"""Pagination for list endpoints: a cursor over the primary key, so no page ever runs COUNT(*)
(a count over millions of rows costs seconds) and pages stay stable while rows are added.

    class WidgetListApi(GenericAPIView):
        pagination_class = IdCursorPagination
"""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
