"""SendGrid v3 Mail Send (`POST /v3/mail/send`): up to 1000 personalizations per call.

One request carries up to 1000 messages, each its own personalization with its own subject,
headers and `custom_args.notifier_message_id` (the webhook normaliser reads that key back from
every event). Bodies differ per recipient, but the content block is per request, so when the
bodies differ they travel as per-personalization `substitutions` for two tags that make up the
whole text and HTML content. Substitutions apply to text and HTML content and are limited in
size per personalization ("Substitutions are limited to 50,000 bytes per personalization
block", https://www.twilio.com/docs/sendgrid/for-developers/sending-email/substitution-tags);
a message over our budget goes out in a request of its own with literal content.
Personalizations: https://www.twilio.com/docs/sendgrid/for-developers/sending-email/personalizations

Addresses: recipients travel with IDNA domains (addresses.wire_emails), the sender as
`{"email", "name"}` (the display name in `name`, never the whole `Name <addr>` in `email`). A
request stays under `max_request_bytes` (SENDGRID_MAX_REQUEST_BYTES, the documented 30 MB: "The
total size of your email, including attachments, must be less than 30MB"): each message counts
the JSON of its personalization with its bodies as substitutions, an upper bound of what it adds.

A 400 names the offending field (`personalizations.<i>.to.<j>.email`, errors page
https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors); nothing of that request
was accepted, so those personalizations fail and the rest is sent again at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from delivery.providers.addresses import mailbox, wire_emails
from delivery.providers.base import Outcome, OutgoingEmail, Provider, SendResult
from delivery.providers.http import (
    HttpAnswer,
    HttpSettings,
    chunks_unique_recipients,
    new_session,
    per_email_budget,
    post,
    results_for_answer,
)

MAX_PER_REQUEST = 1000
META_KEY = "notifier_message_id"
TEXT_TAG = "-notifier_text_part-"
HTML_TAG = "-notifier_html_part-"
# Well under the documented 50,000 bytes, leaving room for JSON escaping of the values.
SUBSTITUTION_BUDGET_BYTES = 40_000
_FIELD_RE = re.compile(r"^personalizations\.(\d+)\.")


class SendGridProvider(Provider):
    name = "sendgrid"

    def __init__(self, settings: HttpSettings):
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/v3/mail/send"
        self.session = new_session(settings)
        self.headers = {"Authorization": f"Bearer {settings.api_key}"}

    def send_batch(self, emails: Sequence[OutgoingEmail]) -> list[SendResult]:
        ready, refused = wire_emails(emails)
        by_id = {result.message_id: result for result in refused}
        for chunk in _requests_for(ready, self.settings.max_request_bytes):
            for result in self._send_chunk(chunk, retries_left=2):
                by_id[result.message_id] = result
        return [by_id[email.message_id] for email in emails]

    def close(self) -> None:
        self.session.close()

    def _send_chunk(self, chunk: list[OutgoingEmail], retries_left: int) -> list[SendResult]:
        answer = post(self.session, self.settings, self.url, json=mail_send_body(chunk),
                      headers=self.headers)
        x_message_id = (answer.headers or {}).get("X-Message-Id", "")
        if answer.outcome is not Outcome.PERMANENT or len(chunk) == 1 or not retries_left:
            return results_for_answer(chunk, answer, lambda _: x_message_id)
        bad = _rejected_indexes(answer)
        if not bad or len(bad) == len(chunk):
            return results_for_answer(chunk, answer, lambda _: x_message_id)
        rejected = [email for i, email in enumerate(chunk) if i in bad]
        rest = [email for i, email in enumerate(chunk) if i not in bad]
        return results_for_answer(rejected, answer, str) + self._send_chunk(rest, retries_left - 1)


def _requests_for(emails: Sequence[OutgoingEmail], max_bytes: int) -> list[list[OutgoingEmail]]:
    """Oversize bodies alone; the rest grouped by sender in chunks of 1000 distinct addresses
    and at most `max_bytes` (0: no byte limit)."""
    alone = [[e] for e in emails if _substitution_bytes(e) > SUBSTITUTION_BUDGET_BYTES]
    single_ids = {chunk[0].message_id for chunk in alone}
    groups: dict[str, list[OutgoingEmail]] = {}
    for email in emails:
        if email.message_id not in single_ids:
            groups.setdefault(email.from_email, []).append(email)
    budget = per_email_budget(max_bytes)
    chunks = [
        chunk
        for group in groups.values()
        for chunk in chunks_unique_recipients(group, MAX_PER_REQUEST, max_bytes=budget,
                                              bytes_of=_personalization_bytes)
    ]
    return chunks + alone


def _personalization_bytes(email: OutgoingEmail) -> int:
    """What one message adds to the request body: requests writes JSON with ASCII escapes."""
    return len(json.dumps(_personalization(email, substitute=True))) + 2  # ", " separator


def _substitution_bytes(email: OutgoingEmail) -> int:
    return len(email.text.encode()) + len(email.html.encode())


def mail_send_body(chunk: Sequence[OutgoingEmail]) -> dict[str, Any]:
    """The JSON body for one request (all emails share one sender)."""
    first = chunk[0]
    shared = all((e.text, e.html) == (first.text, first.html) for e in chunk)
    text, html = (first.text, first.html) if shared else (TEXT_TAG, HTML_TAG)
    content = [{"type": "text/plain", "value": text or " "}]
    if html:
        content.append({"type": "text/html", "value": html})
    return {
        "from": _sender(first.from_email),
        "personalizations": [_personalization(e, substitute=not shared) for e in chunk],
        "content": content,
    }


def _sender(from_email: str) -> dict[str, str]:
    sender = mailbox(from_email)
    named = {"name": sender.display_name} if sender.display_name else {}
    return {"email": sender.addr_spec, **named}


def _personalization(email: OutgoingEmail, *, substitute: bool) -> dict[str, Any]:
    block: dict[str, Any] = {
        "to": [{"email": email.recipient}],
        "subject": email.subject,
        "custom_args": {META_KEY: str(email.message_id)},
    }
    if email.headers:
        block["headers"] = dict(email.headers)
    if substitute:
        block["substitutions"] = {TEXT_TAG: email.text or " ", HTML_TAG: email.html}
    return block


def _rejected_indexes(answer: HttpAnswer) -> set[int]:
    try:
        errors = json.loads(answer.body).get("errors") or []
    except (ValueError, AttributeError):
        return set()
    found = set()
    for error in errors:
        match = _FIELD_RE.match(str((error or {}).get("field") or ""))
        if match:
            found.add(int(match.group(1)))
    return found
