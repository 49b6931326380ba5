"""Characters no API input may carry: NUL and lone UTF-16 surrogates.

PostgreSQL stores NUL in neither text nor jsonb (the INSERT fails: a 500 if nothing catches
it), and a lone surrogate (JSON allows the escape "\\ud800") cannot be encoded as UTF-8 for the
database, a log line or an email. Refusing both at the boundary (the JSON parser, the query
string, the path) keeps every view from having to remember it.
"""

from __future__ import annotations

import re
from typing import Any

FORBIDDEN = re.compile("[\x00\ud800-\udfff]")
MESSAGE = "NUL characters and unpaired UTF-16 surrogates are not allowed."


def is_clean(text: str) -> bool:
    return FORBIDDEN.search(text) is None


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def forbidden_paths(data: Any) -> list[str]:
    """JSON paths (`contacts[0].name`) of the strings in `data` holding a forbidden character;
    a bad object key names the object holding it. Iterative: the parser admits deep nesting."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not is_clean(value):
                found.append(path or "body")
        elif isinstance(value, dict):
            if not all(is_clean(key) for key in value):
                found.append(path or "body")
            stack.extend((_child(path, key), item) for key, item in value.items() if is_clean(key))
        elif isinstance(value, list):
            stack.extend((_child(path, index), item) for index, item in enumerate(value))
    return sorted(found)
