"""Reads on the audience: is an address suppressed."""

from __future__ import annotations

from audience.models import Suppression


def email_is_suppressed(*, email: str) -> bool:
    return Suppression.objects.filter(email=email.lower()).exists()


def email_is_suppressed_sql(address: str = "%s") -> str:
    """email_is_suppressed as a boolean SQL expression, for a statement that decides in one round
    trip. `address` is the SQL of the lower-cased address (as email_is_suppressed compares): by
    default one parameter, or e.g. `lower(m.recipient)` for a row the statement reads."""
    return f"EXISTS (SELECT 1 FROM {Suppression._meta.db_table} s WHERE s.email = {address})"
