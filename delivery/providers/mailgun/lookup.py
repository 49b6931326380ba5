"""Mailgun: is an AMBIGUOUS send among the domain's events? (`GET /v3/<domain>/events`)

Our id travels as the variable `v:notifier_message_id`, which every event returns in its
`user-variables`. The events API filters by documented fields only (event, recipient,
message-id, subject, ...; no user variable: "Filter Field",
https://documentation.mailgun.com/docs/mailgun/user-manual/events/filter-field), and the
Mailgun message id of an AMBIGUOUS send is what we never received. So one request asks for the
`accepted` events of the batch's recipients, a filter expression `"a@x" OR "b@y"` ("Filter
Expression": `foo OR bar`), in the time range of their hand-offs, ascending, 300 a page (the
documented maximum), and our ids are matched in `user-variables`. The range is traversed page
by page (`paging.next`) until an empty page, as the events API asks.

Eventually consistent: events "follow different routes to the event storage", so "the page of
most recent events ... may not contain all the events that occurred at that time", and a page
is trustworthy only once its events are older than a threshold age, "e.g. half an hour"
(https://documentation.mailgun.com/docs/mailgun/user-manual/events/event-polling). A message not
found is NOT_FOUND here; delivery/services/esp_lookup.py counts that as proof only for sends
handed over longer ago than NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS (30 min).

A search cut short (more than MAX_PAGES pages, or out of time) answers only what it found. A key
that cannot read events (401/403: a domain sending key can only send) or an unknown domain (404)
is LookupNotEnabledError.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import requests

from delivery.providers.addresses import wire_address
from delivery.providers.base import MESSAGE_ID_KEY, NOT_FOUND, Found, LookupAnswers, LookupQuery
from delivery.providers.http import HttpSettings, lookup_get

API = "GET /v3/<domain>/events"
PAGE_LIMIT = 300  # "The number of entries to return (300 max)"
MAX_PAGES = 5
# The hand-off instants are our clock, the event timestamps Mailgun's: the range is widened by
# this on each side (clock skew), and after the last hand-off by the request's own time too.
RANGE_MARGIN_SECONDS = 300


def events_lookup(session: requests.Session, settings: HttpSettings, queries: Sequence[LookupQuery],
                  *, timeout: float) -> LookupAnswers:
    """Found or NOT_FOUND for each query, or only the Found ones when the search was cut short."""
    wanted = {str(q.message_id): q.message_id for q in queries}
    recipients = sorted({address for address in map(wire_address, (q.recipient for q in queries)) if address})
    if not recipients:
        return {}
    deadline = time.monotonic() + timeout
    base = f"{settings.base_url.rstrip('/')}/v3/{settings.domain}/events"
    url: str | None = base
    params: dict[str, str] | None = _params(queries, recipients, settings.read_timeout)
    found: LookupAnswers = {}
    for _ in range(MAX_PAGES):
        page = lookup_get(session, settings, url, deadline=deadline, not_enabled=_not_enabled,
                          params=params, auth=("api", settings.api_key))
        items = page.get("items") or []
        for item in items:
            message_id = wanted.get(str((item.get("user-variables") or {}).get(MESSAGE_ID_KEY, "")))
            if message_id is not None and message_id not in found:
                found[message_id] = _found(item)
        if not items:  # the end of the range: everything in it was seen
            return {message_id: found.get(message_id, NOT_FOUND) for message_id in wanted.values()}
        url, params = (page.get("paging") or {}).get("next"), None
        if not url or not url.startswith(base):  # never send our key anywhere else
            break
    return found


def _params(queries: Sequence[LookupQuery], recipients: list[str], read_timeout: float) -> dict[str, str]:
    begin = min(q.handed_over_at for q in queries).timestamp() - RANGE_MARGIN_SECONDS
    end = max(q.handed_over_at for q in queries).timestamp() + RANGE_MARGIN_SECONDS + read_timeout
    return {"begin": f"{begin:.0f}", "end": f"{end:.0f}", "ascending": "yes", "limit": str(PAGE_LIMIT),
            "event": "accepted", "recipient": " OR ".join(f'"{address}"' for address in recipients)}


def _found(item: dict) -> Found:
    headers = (item.get("message") or {}).get("headers") or {}
    return Found(provider_message_id=str(headers.get("message-id") or "").strip("<>"),
                 event=str(item.get("event") or ""), at=str(item.get("timestamp") or ""))


def _not_enabled(response: requests.Response) -> bool:
    return response.status_code in (401, 403, 404)
