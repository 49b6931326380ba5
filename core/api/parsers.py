"""JSON parser that turns every malformed body into a 400, never a 500.

DRF's JSONParser catches ValueError only: a body nested thousands of levels deep raises
RecursionError inside json.loads, which would surface as a 500. A string holding NUL or a lone
surrogate anywhere in the body (core/api/text.py) is a 400 naming its JSON path.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from core.api.text import MESSAGE, forbidden_paths


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc
        bad = forbidden_paths(data)
        if bad:
            raise ValidationError({path: [MESSAGE] for path in bad})
        return data
