"""Pagination for list endpoints: a cursor over the primary key, so no page ever runs COUNT(*)
(a count over millions of rows costs seconds) and pages stay stable while rows are added.

    class WidgetListApi(GenericAPIView):
        pagination_class = IdCursorPagination
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination

# The position is the last page's id: a bigint. DRF passes a forged one (`p=' OR 1=1--`) to
# the id filter, where it fails as a ValueError (a 500) instead of a bad cursor.
_ID_POSITION = re.compile(r"[0-9]{1,18}")
INVALID_CURSOR = "Invalid cursor."


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def decode_cursor(self, request: Any) -> Cursor | None:
        """A garbled or forged cursor is bad input (400 naming `cursor`), not a missing page
        (DRF: 404) nor a failed query (500)."""
        try:
            cursor = super().decode_cursor(request)
        except NotFound as exc:
            raise ValidationError({"cursor": [INVALID_CURSOR]}) from exc
        if cursor is not None and cursor.position is not None and not _ID_POSITION.fullmatch(
                cursor.position):
            raise ValidationError({"cursor": [INVALID_CURSOR]})
        return cursor
