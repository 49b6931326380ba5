"""Pagination for list endpoints: a cursor over the primary key, so no page ever runs COUNT(*)
(a count over millions of rows costs seconds) and pages stay stable while rows are added.

    class WidgetListApi(GenericAPIView):
        pagination_class = IdCursorPagination
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def decode_cursor(self, request: Any) -> Any:
        """A garbled cursor is bad input (400 naming `cursor`), not a missing page (DRF: 404)."""
        try:
            return super().decode_cursor(request)
        except NotFound as exc:
            raise ValidationError({"cursor": [str(exc.detail)]}) from exc
