"""Reads on the audience: is an address suppressed."""

from __future__ import annotations

from audience.models import Suppression


def email_is_suppressed(*, email: str) -> bool:
    return Suppression.objects.filter(email=email.lower()).exists()
