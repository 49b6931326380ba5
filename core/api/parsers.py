"""JSON parser that turns every malformed body into a 400, never a 500.

DRF's JSONParser catches ValueError only: a body nested thousands of levels deep raises
RecursionError inside json.loads, which would surface as a 500. A string holding NUL or a lone
surrogate anywhere in the body (core/api/text.py) is a 400 naming its JSON path.
"""

from __future__ import annotations

import io
import re
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from core.api.text import MESSAGE, forbidden_paths

# In UTF-8 JSON text NUL and surrogates can only arrive escaped (a raw control character is a
# parse error, raw surrogates are not valid UTF-8). Walking a 2 MiB body costs ~5x its parse,
# so only a body holding such an escape (or in another charset) is walked.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_UTF8 = {"utf-8", "utf8"}


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        if encoding.lower() in _UTF8 and not _SUSPECT_ESCAPE.search(raw):
            return data
        bad = forbidden_paths(data)
        if bad:
            raise ValidationError({path: [MESSAGE] for path in bad})
        return data
