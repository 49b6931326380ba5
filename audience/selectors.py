"""Reads on the audience: is an address suppressed, what a contact brings to a template."""

from __future__ import annotations

from audience.models import Suppression


def email_is_suppressed(*, email: str, sandbox: bool = False) -> bool:
    """`sandbox`: a test key's send, matched against the test key's suppressions only."""
    return Suppression.objects.filter(email=email.lower(), sandbox=sandbox).exists()


def email_is_suppressed_sql(address: str = "%s", sandbox: str = "FALSE") -> str:
    """email_is_suppressed as a boolean SQL expression, for a statement that decides in one round
    trip. `address` is the SQL of the lower-cased address (as email_is_suppressed compares): by
    default one parameter, or e.g. `lower(m.recipient)` for a row the statement reads. `sandbox`:
    SQL of whether the send is a test key's (a constant, a parameter, or the row's own
    `message_is_test_sql`): live and test suppressions never stop each other's sends. Both
    columns are the unique index's, so the lookup costs what it did."""
    table = Suppression._meta.db_table
    return f"EXISTS (SELECT 1 FROM {table} s WHERE s.email = {address} AND s.sandbox = {sandbox})"


def contact_merge_data_sql(alias: str) -> str:
    """A contact's template data as SQL over the contact row `alias`: its attributes, then its
    email, name, timezone and locale (these four win). What a campaign message renders with,
    under the audience's own per-recipient data (docs/decisions.md 65); the preview's Python
    twin is campaigns/api/preview.py `contact_context`."""
    return (
        f"{alias}.attributes || jsonb_build_object('email', {alias}.email, 'name', {alias}.name, "
        f"'timezone', {alias}.timezone, 'locale', {alias}.locale)"
    )
