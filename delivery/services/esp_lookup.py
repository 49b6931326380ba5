"""Ask the ESP whether it has an AMBIGUOUS send, by our id (issue 32, decision 95).

Where an ESP can be searched by the id every message carries (Mailgun's events API, SendGrid's
Email Activity API; SES and SMTP cannot: `Provider.offers_lookup`), the recovery loop asks it
about the rows held for it (delivery/services/ambiguity.py settles them from the answer). The
loop runs every tick in every scheduler process and waits for the answer, so each ESP is asked
sparingly, and the loop is never held long:

- at most one call per provider every NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS (15 s), across
  every scheduler: a Redis slot taken with SET NX (SendGrid allows its activity API 6 requests a
  minute; a 429 keeps the slot for its Retry-After);
- about NOTIFIER_AMBIGUOUS_LOOKUP_BATCH (50) rows per call, in one request where the ESP allows
  it; a cursor walks the held rows round and round, so rows the ESP cannot settle yet never keep
  the others from being asked;
- each call within NOTIFIER_AMBIGUOUS_LOOKUP_TIMEOUT_SECONDS (3 s); a timeout, an error or a
  missing Redis only means no answer this time: the rows wait for the event-window rule or the
  next call;
- an account that cannot use the lookup (SendGrid without its paid add-on answers 403 / 400
  "authorization required"; a Mailgun sending key 401) turns it off for that provider for
  OFF_SECONDS, with the reason logged, and asks again after (the add-on may have been bought).

    notifier:delivery:esp_lookup:slot:<provider>     string, SET NX with TTL: one call per interval
    notifier:delivery:esp_lookup:off:<provider>      string reason, TTL OFF_SECONDS: lookup off
    notifier:delivery:esp_lookup:cursor:<provider>   string: the last message id asked, TTL 1 day
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from redis.exceptions import RedisError

from core.redis_client import get_redis, redis_key
from delivery.providers import get_provider
from delivery.providers.base import (
    Found,
    LookupNotEnabledError,
    LookupQuery,
    LookupUnavailableError,
    NotFound,
    Provider,
)

logger = logging.getLogger(__name__)
OFF_SECONDS = 3600
CURSOR_TTL_SECONDS = 86400


@dataclass(frozen=True)
class LookupAnswer:
    """What one provider's lookup said of one message, and the API it asked."""

    provider: str
    api: str
    answer: Found | NotFound


def esp_lookups(held: Mapping[str, Sequence[LookupQuery]]) -> dict[int, LookupAnswer]:
    """Per message id, what its provider's lookup answered; rows of a provider not asked this
    time (no lookup, off, asked recently, failed) are left out."""
    if not settings.NOTIFIER_AMBIGUOUS_LOOKUP:
        return {}
    answers: dict[int, LookupAnswer] = {}
    for name, queries in sorted(held.items()):
        provider = _provider(name)
        if provider is None or not queries:
            continue
        try:
            found = _ask(provider, queries)
        except RedisError as exc:  # no slot can be taken: nobody asks, the rows wait
            logger.warning("ESP lookup at %s skipped, Redis unavailable: %s", name, exc)
            continue
        answers.update((pk, LookupAnswer(name, provider.lookup_api, answer)) for pk, answer in found.items())
    return answers


def lookup_off_reason(provider: str) -> str | None:
    """Why the lookup is off for `provider` (its account refused it), or None."""
    value = get_redis().get(_off_key(provider))
    return value.decode() if value is not None else None


def lookup_next_step(provider: str) -> str:
    """In words, what the lookup does for `provider`'s held rows (dashboard, API); empty when it
    offers none."""
    if not settings.NOTIFIER_AMBIGUOUS_LOOKUP or not provider or _provider(provider) is None:
        return ""
    try:
        off = lookup_off_reason(provider)
    except RedisError:
        off = None
    if off:
        return f"{provider}'s lookup is off for now ({off[:160]}); "
    return (f"{provider} is asked every {settings.NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS:g} s (has it: "
            f"sent; has not, once handed over {settings.NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS} s "
            f"ago: re-sent); ")


def _provider(name: str) -> Provider | None:
    try:
        provider = get_provider(name)
    except ValueError:  # a provider no longer configured: its rows keep the other rules
        return None
    return provider if provider.offers_lookup() else None


def _ask(provider: Provider, queries: Sequence[LookupQuery]) -> dict[int, Found | NotFound]:
    redis = get_redis()
    if redis.exists(_off_key(provider.name)) or not _slot_taken(provider.name):
        return {}
    batch = _next_batch(provider.name, queries)
    try:
        return provider.lookup(batch, timeout=settings.NOTIFIER_AMBIGUOUS_LOOKUP_TIMEOUT_SECONDS)
    except LookupNotEnabledError as exc:
        redis.set(_off_key(provider.name), str(exc)[:500], ex=OFF_SECONDS)
        logger.warning("ESP lookup at %s turned off for %d s, the account cannot use %s: %s; its "
                       "AMBIGUOUS sends wait for its events", provider.name, OFF_SECONDS,
                       provider.lookup_api, exc)
    except LookupUnavailableError as exc:
        wait = settings.NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS
        if exc.retry_after:  # a 429: no call before the ESP allows it
            wait = max(wait, exc.retry_after)
            redis.set(_slot_key(provider.name), "1", ex=max(1, math.ceil(wait)))
        logger.warning("ESP lookup at %s got no answer (%s); asked again in %.0f s", provider.name, exc, wait)
    except Exception:  # an answer the adapter could not read must never stop the recovery loop
        logger.exception("ESP lookup at %s failed; its AMBIGUOUS sends keep the other rules", provider.name)
    return {}


def _slot_taken(provider: str) -> bool:
    """This process may call `provider` now: nobody did within the interval (nor got a 429 whose
    wait is still running)."""
    interval_ms = int(settings.NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS * 1000)
    if interval_ms <= 0:
        return not get_redis().exists(_slot_key(provider))
    return bool(get_redis().set(_slot_key(provider), "1", nx=True, px=interval_ms))


def _next_batch(provider: str, queries: Sequence[LookupQuery]) -> list[LookupQuery]:
    """The next NOTIFIER_AMBIGUOUS_LOOKUP_BATCH rows by id after the last one asked, wrapping
    around; the cursor moves to the last one taken."""
    size = max(1, settings.NOTIFIER_AMBIGUOUS_LOOKUP_BATCH)
    ordered = sorted(queries, key=lambda q: q.message_id)
    key = _cursor_key(provider)
    last = int(get_redis().get(key) or 0)
    after = [q for q in ordered if q.message_id > last]
    batch = (after + [q for q in ordered if q.message_id <= last])[:size]
    get_redis().set(key, str(batch[-1].message_id), ex=CURSOR_TTL_SECONDS)
    return batch


def _slot_key(provider: str) -> str:
    return redis_key("delivery", "esp_lookup", "slot", provider)


def _off_key(provider: str) -> str:
    return redis_key("delivery", "esp_lookup", "off", provider)


def _cursor_key(provider: str) -> str:
    return redis_key("delivery", "esp_lookup", "cursor", provider)


def lookup_queries(rows: Sequence[tuple[int, str, datetime | None]]) -> list[LookupQuery]:
    """(id, recipient, handed over at) rows as queries; a row with no hand-off instant has
    nothing to look for."""
    return [LookupQuery(pk, recipient, started) for pk, recipient, started in rows if started is not None]
