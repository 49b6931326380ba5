"""The three types of API key a service has (issue 27), as GOV.UK Notify's.

- live: sends for real to anyone;
- team: sends for real, only to addresses on the service's team list;
- test: the whole API behaves as with a live key, but nothing reaches an ESP or SMTP server:
  messages are settled by the sandbox from magic recipient addresses, and stay out of the live
  statistics, the dashboard's live figures and the ESP rate budgets.

Every message records the type of the key that created it (`EmailMessage.key_type`).
"""

from __future__ import annotations

from typing import TypeVar

from django.db import models
from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


class KeyType(models.TextChoices):
    LIVE = "live", "live"
    TEAM = "team", "team (team list only)"
    TEST = "test", "test (sends nothing)"


def sends_for_real(key_type: str) -> bool:
    """True unless the key is a test key: its messages never leave the platform."""
    return key_type != KeyType.TEST


def caller_key_type(request: object) -> str:
    """The type of the key a request was authenticated with (its Caller's, clients/caller.py):
    what every creating view passes to its service (`key_type=`) and every reading view to its
    selector. A caller without one (an OAuth2 token) is live."""
    return getattr(getattr(request, "user", None), "key_type", KeyType.LIVE)


def on_callers_side(queryset: QuerySet[M], key_type: str) -> QuerySet[M]:
    """The rows (with a `key_type` column) a caller of this key type lists: a test key's own
    test data, or everything but test data for live and team keys."""
    if key_type == KeyType.TEST:
        return queryset.filter(key_type=KeyType.TEST)
    return queryset.exclude(key_type=KeyType.TEST)
