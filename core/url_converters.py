"""URL converters shared by every API path."""

from __future__ import annotations

from django.urls import register_converter


class IdConverter:
    """A database id: 1-18 digits, so it always fits a bigint (a longer one is a 404)."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


# Registered when this module is imported, so every urls module that uses <id:...> can import it
# first, whatever order Django loads the urls modules in.
register_converter(IdConverter, "id")
