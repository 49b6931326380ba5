"""The signed values of the recipient's links: one-click unsubscribe and the preference page.

Both are Django signatures (HMAC-SHA256 over the SECRET_KEY, salted per kind), so a link cannot
be forged, altered, or turned to another address, topic or service; they are signed, not
encrypted: whoever holds a link can read what it names (decision 108). The address is written
in URL-safe base64 (an address may hold `+`, `%`, `/`), which keeps it out of plain sight, not
secret: it is the recipient's own address, in a link mailed to that address.

- Campaign unsubscribe, "<contact id>.<campaign id>" (every link sent since decision 48 keeps
  working: same salt, same format).
- Address unsubscribe, "a.<topic id>.<campaign id>.<address>.<service id>" (either id may be
  empty): a broadcast message with no contact (a one-off broadcast send, an inline audience's
  row). No topic: the service's whole broadcast stream.
- Preference link, "<address>.<service id>:<timestamp>" (a TimestampSigner value): it expires
  after NOTIFIER_PREFERENCE_LINK_DAYS.

Signing is on the send path (one or two links a broadcast message): each signer's keyed HMAC is
prepared once per process and copied per token, byte for byte what `Signer.sign` writes
(decision 57).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.core import signing
from django.urls import get_script_prefix, reverse
from django.utils.encoding import force_bytes

UNSUBSCRIBE_SIGNER = signing.Signer(salt="notifier.campaigns.unsubscribe")  # salt of links already sent
PREFERENCE_SIGNER = signing.TimestampSigner(salt="notifier.consent.preferences")
_ADDRESS_KIND = "a"


@dataclass(frozen=True)
class ContactTarget:
    """A campaign link's recipient: a contact, and the campaign whose mail carried it."""

    contact_id: int
    campaign_id: int


@dataclass(frozen=True)
class AddressTarget:
    """A link naming an address of a service; `topic_id` None: the whole broadcast stream."""

    service_id: str
    email: str
    topic_id: int | None = None
    campaign_id: int | None = None


def unsubscribe_token(*, contact_id: int, campaign_id: int) -> str:
    return _signed(UNSUBSCRIBE_SIGNER, f"{contact_id}.{campaign_id}")


def address_unsubscribe_token(
    *, service_id: str, email: str, topic_id: int | None = None, campaign_id: int | None = None
) -> str:
    value = f"{_ADDRESS_KIND}.{topic_id or ''}.{campaign_id or ''}.{_encoded(email)}.{service_id}"
    return _signed(UNSUBSCRIBE_SIGNER, value)


def unsubscribe_token_read(token: str) -> ContactTarget | AddressTarget | None:
    """What a one-click link names, or None for a forged, altered or malformed one."""
    try:
        value = UNSUBSCRIBE_SIGNER.unsign(token)
        if not value.startswith(f"{_ADDRESS_KIND}."):
            contact_id, _, campaign_id = value.partition(".")
            return ContactTarget(int(contact_id), int(campaign_id))
        _, topic_id, campaign_id, email, service_id = value.split(".", 4)
        return AddressTarget(service_id, _decoded(email), _optional_id(topic_id), _optional_id(campaign_id))
    except (signing.BadSignature, ValueError):
        return None


def preference_token(*, service_id: str, email: str, at: float | None = None) -> str:
    """`PREFERENCE_SIGNER.sign(...)` of this address at `at` (now)."""
    stamp = _stamp(int(time.time() if at is None else at))
    return _signed(PREFERENCE_SIGNER, f"{_encoded(email)}.{service_id}{PREFERENCE_SIGNER.sep}{stamp}")


@lru_cache(maxsize=4)
def _stamp(seconds: int) -> str:
    """TimestampSigner's timestamp (base 62), once per second rather than once per message."""
    return signing.b62_encode(seconds)


def preference_token_read(token: str) -> AddressTarget | None:
    """The address and service a preference link names, or None: forged, altered, malformed or
    older than NOTIFIER_PREFERENCE_LINK_DAYS (the page answers all of them alike)."""
    max_age = settings.NOTIFIER_PREFERENCE_LINK_DAYS * 86400
    try:
        email, _, service_id = PREFERENCE_SIGNER.unsign(token, max_age=max_age).partition(".")
        return AddressTarget(service_id, _decoded(email)) if service_id else None
    except (signing.BadSignature, ValueError):
        return None


def unsubscribe_url(token: str) -> str:
    return _public_url("unsubscribe", token)


def preferences_url(*, service_id: str, email: str) -> str:
    return _public_url("preferences", preference_token(service_id=service_id, email=email))


def _signed(signer: signing.Signer, value: str) -> str:
    """`signer.sign(value)` from a keyed HMAC prepared once per process.

    Signer.sign derives its key (a SHA-256 of salt and secret) and builds a new HMAC per call,
    ~15 us; copying a prepared HMAC costs ~2 us. Same algorithm, key, separator and base64, so
    `signer.unsign` (and every token already sent) reads it (tests/consent check equality)."""
    mac = _prepared_hmac(signer.key, signer.salt, signer.algorithm).copy()
    mac.update(value.encode())
    signature = base64.urlsafe_b64encode(mac.digest()).strip(b"=").decode()
    return f"{value}{signer.sep}{signature}"


@lru_cache(maxsize=8)
def _prepared_hmac(key: str | bytes, salt: str, algorithm: str) -> hmac.HMAC:
    hasher = getattr(hashlib, algorithm)
    derived = hasher(force_bytes(salt + "signer") + force_bytes(key)).digest()
    return hmac.new(derived, digestmod=hasher)


def _encoded(email: str) -> str:
    return base64.urlsafe_b64encode(email.encode()).rstrip(b"=").decode()


def _decoded(encoded: str) -> str:
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError("not an encoded address") from exc


def _optional_id(value: str) -> int | None:
    return int(value) if value else None


_TOKEN_PLACEHOLDER = "TOKENPLACEHOLDER"


_URL_PARTS: dict[tuple[str, str, str, str], tuple[str, str]] = {}


def _public_url(route: str, token: str) -> str:
    """The public URL of `reverse(route, [token])`; the route is resolved once per public URL and
    script prefix (reverse() per message cost ~40 us), then the token is placed into it."""
    key = (route, settings.NOTIFIER_PUBLIC_URL, get_script_prefix(), settings.ROOT_URLCONF)
    parts = _URL_PARTS.get(key)
    if parts is None:
        if len(_URL_PARTS) > 64:
            _URL_PARTS.clear()
        path = reverse(route, args=[_TOKEN_PLACEHOLDER])
        head, _, tail = path.partition(_TOKEN_PLACEHOLDER)
        parts = _URL_PARTS[key] = (key[1].rstrip("/") + head, tail)
    return f"{parts[0]}{token}{parts[1]}"
