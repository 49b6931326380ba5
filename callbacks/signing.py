"""Standard Webhooks signatures (the `standardwebhooks` library): the headers of one POST.

`webhook-signature` holds one `v1,<base64 HMAC-SHA256 of id.timestamp.body>` per secret in
use, space-separated: the current one, and the previous one while a rotation's overlap lasts,
so a receiver verifying with either secret accepts the request (the scheme allows several).
"""

from __future__ import annotations

import base64
import secrets
from datetime import datetime

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def signed_headers(
    *, message_id: str, at: datetime, body: bytes, secrets_in_use: list[str],
) -> dict[str, str]:
    signatures = [Webhook(secret).sign(message_id, at, body) for secret in secrets_in_use]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(signatures),
        "content-type": "application/json",
        "user-agent": "notifier-callbacks/1",
    }
