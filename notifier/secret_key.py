"""Refuse a placeholder or short DJANGO_SECRET_KEY at startup.

Settings call `refuse_weak_secret_key` when DJANGO_SECRET_KEY is set and DJANGO_DEBUG is off, so
web, workers, scheduler, beat and Flower all fail to start with the same message. An unset key
is never refused: local runs use a per-checkout random key under NOTIFIER_VAR_DIR.
"""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured

MIN_LENGTH = 32
MIN_DISTINCT_CHARACTERS = 5
# Compared with letters and digits only, lower case: "Change-Me", "change_me" and "CHANGEME" match.
PLACEHOLDERS = frozenset({"", "changeme", "secret", "secretkey", "djangosecretkey", "yoursecretkey"})


def weak_secret_key_reason(value: str) -> str | None:
    """Why `value` must not sign anything in production, or None when it is acceptable."""
    normalized = re.sub(r"[^a-z0-9]", "", value.lower())
    if normalized in PLACEHOLDERS or "changeme" in normalized or value.startswith("django-insecure-"):
        return "is a placeholder"
    if len(value) < MIN_LENGTH:
        return f"is shorter than {MIN_LENGTH} characters"
    if len(set(value)) < MIN_DISTINCT_CHARACTERS:
        return f"has fewer than {MIN_DISTINCT_CHARACTERS} distinct characters"
    return None


def refuse_weak_secret_key(value: str) -> None:
    reason = weak_secret_key_reason(value)
    if reason is not None:
        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY {reason}. Set it to a long random value, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`, or unset it for a local "
            "run (a random key is then kept under NOTIFIER_VAR_DIR). Every process that signs "
            "(web, workers) must share the same key."
        )
