"""What personal-data removal does to a value (issue 30, decision 120): the keyed hash a scrubbed
row keeps of its address, and the redaction of an address quoted in free text (an SMTP answer
such as "550 5.1.1 <ada@example.com>: user unknown") or in a stored JSON payload.

The hash is HMAC-SHA256 of the address stripped and lower-cased (the send path compares
addresses lower-cased), keyed by NOTIFIER_RECIPIENT_HASH_KEY, else by a key derived from
SECRET_KEY. It lets a scrubbed row be found by an address someone already knows (the message
log's `recipient` filter, the admin's search, an ESP's late bounce) without storing the address:
without the key, a dictionary of likely addresses cannot be checked against a database dump.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

REDACTED = "[address removed]"
HASH_BYTES = 32


@cache
def _key(secret: str, dedicated: str) -> bytes:
    if dedicated:
        return dedicated.encode()
    # A key of its own purpose, so the hash never equals any other HMAC made with SECRET_KEY.
    return hmac.new(secret.encode(), b"notifier.recipient-hash.v1", hashlib.sha256).digest()


def recipient_hash(address: str) -> bytes:
    """The 32-byte keyed hash of an address, any case, surrounding spaces ignored."""
    key = _key(settings.SECRET_KEY, settings.NOTIFIER_RECIPIENT_HASH_KEY)
    return hmac.new(key, address.strip().lower().encode(), hashlib.sha256).digest()


def redact(text: str, address: str) -> str:
    """`text` with every occurrence of `address` (any case) replaced by REDACTED."""
    if not text or not address or "@" not in text:
        return text
    return re.sub(re.escape(address.strip()), REDACTED, text, flags=re.IGNORECASE)


def redact_json(value: Any, address: str) -> Any:
    """A JSON value with the address redacted in every string (keys included)."""
    if isinstance(value, str):
        return redact(value, address)
    if isinstance(value, list):
        return [redact_json(item, address) for item in value]
    if isinstance(value, dict):
        return {redact(key, address): redact_json(item, address) for key, item in value.items()}
    return value


def url_without_query(url: str) -> str:
    """A clicked link kept for statistics without what personalises it (query and fragment:
    tokens, addresses, tracking ids)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.netloc.rsplit("@", 1)[-1]  # never a user name or password
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
