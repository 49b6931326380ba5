"""The position in a service's log: (txid, id) of the last event read, as an opaque string."""

from __future__ import annotations

import base64
from dataclasses import dataclass


class InvalidCursorError(ValueError):
    """A cursor that this code did not make."""


@dataclass(frozen=True, order=True)
class EventCursor:
    txid: int
    id: int

    def encode(self) -> str:
        raw = f"{self.txid}.{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> EventCursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            txid, event_id = raw.split(".")
            cursor = cls(int(txid), int(event_id))
        except (ValueError, UnicodeDecodeError) as error:
            raise InvalidCursorError(text) from error
        if cursor.txid < 0 or cursor.id < 0:
            raise InvalidCursorError(text)
        return cursor


START = EventCursor(0, 0)
