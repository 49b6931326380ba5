"""SendGrid: is an AMBIGUOUS send in the Email Activity? (`GET /v3/messages?query=...`)

Our id travels as the custom arg `notifier_message_id`, which the Email Activity query language
names `unique_args['notifier_message_id']`. One request asks for a whole batch, its clauses
joined with OR: `(unique_args['notifier_message_id']="12") OR (...="13")`, `limit` 1000 (the
documented maximum; https://www.twilio.com/docs/sendgrid/api-reference/email-activity/
filter-all-messages). The messages it answers carry no custom args (`msg_id`, `to_email`,
`status`, `last_event_time`, ...), so each is matched to ours by its recipient: a request never
names two messages to one address (a second one is left for a later lookup).

Limits: a paid add-on ("You must purchase additional email activity history to gain access to
the Email Activity Feed API"); without it the API answers 403 `access forbidden` or 400
`authorization required` (sendgrid-csharp #959 and #689, sendgrid-nodejs #1003): that is
LookupNotEnabledError, and delivery/services/esp_lookup.py turns the lookup off for a while. "The
current limit is 6 requests per minute" (429 past it): the caller asks at most once per
NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS per provider. A request holds at most MAX_IDS
clauses, so its URL stays about 4 KB. SendGrid documents no delay before a message shows in the
activity; the caller counts NOT_FOUND as proof only for sends older than
NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS, as for Mailgun.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import requests

from delivery.providers.addresses import wire_address
from delivery.providers.base import MESSAGE_ID_KEY, NOT_FOUND, Found, LookupAnswers, LookupQuery
from delivery.providers.http import HttpSettings, lookup_get

API = "GET /v3/messages"
MAX_IDS = 50
LIMIT = 1000  # "must be greater than 0 and less than or equal to 1000"


def activity_lookup(session: requests.Session, settings: HttpSettings, queries: Sequence[LookupQuery],
                    *, timeout: float) -> LookupAnswers:
    """Found or NOT_FOUND for each query asked (at most MAX_IDS of distinct recipients)."""
    by_address: dict[str, int] = {}
    for query in queries:
        address = wire_address(query.recipient).lower()  # as the answer is matched
        if address and address not in by_address and len(by_address) < MAX_IDS:
            by_address[address] = query.message_id
    if not by_address:
        return {}
    clauses = " OR ".join(f"(unique_args['{MESSAGE_ID_KEY}']=\"{message_id}\")"
                          for message_id in by_address.values())
    body = lookup_get(session, settings, settings.base_url.rstrip("/") + "/v3/messages",
                          deadline=time.monotonic() + timeout, not_enabled=_not_enabled,
                          params={"query": clauses, "limit": str(LIMIT)},
                          headers={"Authorization": f"Bearer {settings.api_key}"})
    messages = body.get("messages") or []
    # A full answer may have left some out: then only what it holds is an answer.
    answers: LookupAnswers = {} if len(messages) >= LIMIT else dict.fromkeys(by_address.values(), NOT_FOUND)
    for message in messages:
        message_id = by_address.get(str(message.get("to_email") or "").lower())
        if message_id is not None:
            answers[message_id] = Found(provider_message_id=str(message.get("msg_id") or ""),
                                        event=str(message.get("status") or ""),
                                        at=str(message.get("last_event_time") or ""))
    return answers


def _not_enabled(response: requests.Response) -> bool:
    if response.status_code in (401, 403, 404):
        return True
    return response.status_code == 400 and "authorization required" in response.text.lower()
