"""The three types of API key a service has (issue 27), as GOV.UK Notify's.

- live: sends for real to anyone;
- team: sends for real, only to addresses on the service's team list;
- test: the whole API behaves as with a live key, but nothing reaches an ESP or SMTP server:
  messages are settled by the sandbox from magic recipient addresses, and stay out of the live
  statistics, the dashboard's live figures and the ESP rate budgets.

Every message records the type of the key that created it (`EmailMessage.key_type`).
"""

from __future__ import annotations

from django.db import models


class KeyType(models.TextChoices):
    LIVE = "live", "live"
    TEAM = "team", "team (team list only)"
    TEST = "test", "test (sends nothing)"


def sends_for_real(key_type: str) -> bool:
    """True unless the key is a test key: its messages never leave the platform."""
    return key_type != KeyType.TEST


def caller_key_type(request: object) -> str:
    """The type of the key a request was authenticated with: what every creating view passes to
    its service (`key_type=`) and every reading view to its selector. Until keys carry a type
    (issue 27's ApiKey), every caller is live: this getattr is the one line to change."""
    return getattr(getattr(request, "auth", None), "key_type", KeyType.LIVE)
