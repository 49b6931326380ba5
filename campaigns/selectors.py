"""Reads on campaigns and suppressions."""

from __future__ import annotations

from campaigns.models import Suppression


def email_is_suppressed(*, email: str) -> bool:
    return Suppression.objects.filter(email=email.lower()).exists()
