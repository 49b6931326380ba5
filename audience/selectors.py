"""Reads on the audience: is an address suppressed."""

from __future__ import annotations

from audience.models import Suppression


def email_is_suppressed(*, email: str) -> bool:
    return Suppression.objects.filter(email=email.lower()).exists()


def email_is_suppressed_sql() -> str:
    """email_is_suppressed as a boolean SQL expression, for a statement that decides in one round
    trip; its one parameter is the address, lower-cased (as email_is_suppressed compares)."""
    return f"EXISTS (SELECT 1 FROM {Suppression._meta.db_table} WHERE email = %s)"
