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
request stays under `max_request_bytes` (NOTIFIER_SENDGRID_MAX_REQUEST_BYTES, the documented 30 MB: "The
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
from functools import lru_cache
from typing import Any

from delivery.providers.addresses import mailbox, wire_emails
from delivery.providers.base import (
    MESSAGE_ID_KEY,
    Journal,
    LookupAnswers,
    LookupQuery,
    Outcome,
    OutgoingEmail,
    Provider,
    SendResult,
)
from delivery.providers.http import (
    HttpAnswer,
    HttpSettings,
    chunks_unique_recipients,
    new_session,
    per_email_budget,
    post,
    results_for_answer,
)
from delivery.providers.sendgrid.lookup import API as LOOKUP_API
from delivery.providers.sendgrid.lookup import activity_lookup
from delivery.providers.substitution import content_holds, substitutable_template
from templates.slots import SlotTemplate

MAX_PER_REQUEST = 1000
TEXT_TAG = "-notifier_text_part-"
HTML_TAG = "-notifier_html_part-"
# Well under the documented 50,000 bytes, leaving room for JSON escaping of the values.
SUBSTITUTION_BUDGET_BYTES = 40_000
_FIELD_RE = re.compile(r"^personalizations\.(\d+)\.")


class SendGridProvider(Provider):
    name = "sendgrid"
    lookup_api = LOOKUP_API

    def __init__(self, settings: HttpSettings):
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/v3/mail/send"
        self.session = new_session(settings)
        self.headers = {"Authorization": f"Bearer {settings.api_key}", "Content-Type": "application/json"}

    def send_batch(self, emails: Sequence[OutgoingEmail], journal: Journal | None = None) -> list[SendResult]:
        ready, refused = wire_emails(emails)
        by_id = {result.message_id: result for result in refused}
        encoder = _Encoder()
        for chunk in _requests_for(ready, self.settings.max_request_bytes, encoder):
            for result in self._send_chunk(chunk, encoder, retries_left=2):
                by_id[result.message_id] = result
        return [by_id[email.message_id] for email in emails]

    def close(self) -> None:
        self.session.close()

    def offers_lookup(self) -> bool:
        return bool(self.settings.api_key)

    def lookup(self, queries: Sequence[LookupQuery], *, timeout: float) -> LookupAnswers:
        """Our ids in the Email Activity, a paid add-on (sendgrid/lookup.py)."""
        return activity_lookup(self.session, self.settings, queries, timeout=timeout)

    def _send_chunk(
        self, chunk: list[OutgoingEmail], encoder: _Encoder, retries_left: int
    ) -> list[SendResult]:
        answer = post(self.session, self.settings, self.url, data=encoded_body(chunk, encoder),
                      headers=self.headers)
        x_message_id = (answer.headers or {}).get("X-Message-Id", "")
        if answer.outcome is not Outcome.PERMANENT or len(chunk) == 1 or not retries_left:
            return results_for_answer(chunk, answer, lambda _: x_message_id)
        bad = _rejected_indexes(answer)
        if not bad or len(bad) == len(chunk):
            return results_for_answer(chunk, answer, lambda _: x_message_id)
        rejected = [email for i, email in enumerate(chunk) if i in bad]
        rest = [email for i, email in enumerate(chunk) if i not in bad]
        return results_for_answer(rejected, answer, str) + self._send_chunk(rest, encoder, retries_left - 1)


class _Encoder:
    """One send_batch's memo: each email's slot template and JSON personalization per mode,
    computed once (the size estimate's JSON is the one that goes into the request)."""

    def __init__(self) -> None:
        self._templates: dict[int, SlotTemplate | None] = {}
        self._encoded: dict[tuple[int, str], str] = {}

    def template(self, email: OutgoingEmail) -> SlotTemplate | None:
        if email.message_id not in self._templates:
            self._templates[email.message_id] = _slot_template(email)
        return self._templates[email.message_id]

    def personalization(self, email: OutgoingEmail, mode: str) -> str:
        key = (email.message_id, mode)
        if key not in self._encoded:
            self._encoded[key] = json.dumps(_personalization(email, mode))
        return self._encoded[key]

    def bytes_of(self, email: OutgoingEmail) -> int:
        """What one message adds to the request body (requests-style JSON, ASCII escapes): its
        slot substitutions, or whole-body substitutions, an upper bound of literal content."""
        mode = _SLOTS if self.template(email) is not None else _WHOLE
        return len(self.personalization(email, mode)) + 2  # ", " separator


def _requests_for(emails: Sequence[OutgoingEmail], max_bytes: int,
                  encoder: _Encoder | None = None) -> list[list[OutgoingEmail]]:
    """Oversize bodies alone; the rest grouped by sender (and slot template) in chunks of 1000
    distinct addresses and at most `max_bytes` (0: no byte limit)."""
    encoder = encoder or _Encoder()
    alone = [[e] for e in emails if _substitution_bytes(e, encoder) > SUBSTITUTION_BUDGET_BYTES
             or _holds_tag(e)]
    single_ids = {chunk[0].message_id for chunk in alone}
    groups: dict[tuple[str, SlotTemplate | None], list[OutgoingEmail]] = {}
    for email in emails:
        if email.message_id not in single_ids:
            groups.setdefault((email.from_email, encoder.template(email)), []).append(email)
    budget = per_email_budget(max_bytes)
    chunks = []
    for (_, template), group in groups.items():
        # The shared content travels once per request, outside the per-email budget's overhead.
        group_budget = max(budget - _content_bytes(template), 1) if budget and template else budget
        chunks += chunks_unique_recipients(group, MAX_PER_REQUEST, max_bytes=group_budget,
                                           bytes_of=encoder.bytes_of)
    return chunks + alone


def _holds_tag(email: OutgoingEmail) -> bool:
    """Content that holds one of our whole-body tags: in a shared request SendGrid would
    substitute it (in the subject too), so it goes alone, with literal content."""
    return content_holds(email, (TEXT_TAG, HTML_TAG))


def _slot_template(email: OutgoingEmail) -> SlotTemplate | None:
    """The slot template this email can travel with as substitutions, or None (literal bodies).

    SendGrid substitutes tags in the subject, the content and custom args, in an order it does
    not document, so a message where a tag could appear other than where we put one (its subject,
    a value or a header holding the template's nonce), or with an empty value (substitution
    values are documented as non-empty strings only by example), keeps the literal path."""
    return substitutable_template(email, empty_values=False)


@lru_cache(maxsize=64)
def _tags(template: SlotTemplate) -> tuple[list[str], list[str]]:
    nonce = template.nonce
    return ([f"-{nonce}h{i}-" for i in range(len(template.html.names))],
            [f"-{nonce}t{i}-" for i in range(len(template.text.names))])


def _slot_content(template: SlotTemplate) -> list[dict[str, str]]:
    html_tags, text_tags = _tags(template)
    return _content(template.text.join(tuple(text_tags)), template.html.join(tuple(html_tags)))


def _content_bytes(template: SlotTemplate) -> int:
    return len(json.dumps(_slot_content(template)))


def _content(text: str, html: str) -> list[dict[str, str]]:
    content = [{"type": "text/plain", "value": text or " "}]
    if html:
        content.append({"type": "text/html", "value": html})
    return content


def _substitution_bytes(email: OutgoingEmail, encoder: _Encoder) -> int:
    if encoder.template(email) is not None:
        fill = email.fill
        return sum(len(v.encode()) + 16 for v in (*fill.html, *fill.text))
    return len(email.text.encode()) + len(email.html.encode())


_LITERAL, _SLOTS, _WHOLE = "literal", "slots", "whole"


def _mode(chunk: Sequence[OutgoingEmail], encoder: _Encoder) -> str:
    """Literal content when every body is the same; slot substitutions when every email shares
    one slot template; else each body whole as two substitutions."""
    first = chunk[0]
    if all((e.text, e.html) == (first.text, first.html) for e in chunk):
        return _LITERAL
    template = encoder.template(first)
    if template is not None and all(encoder.template(e) is template for e in chunk):
        return _SLOTS
    return _WHOLE


def _chunk_content(chunk: Sequence[OutgoingEmail], mode: str) -> list[dict[str, str]]:
    if mode == _SLOTS:
        return _slot_content(chunk[0].fill.template)
    if mode == _WHOLE:
        return _content(TEXT_TAG, HTML_TAG)
    return _content(chunk[0].text, chunk[0].html)


def mail_send_body(chunk: Sequence[OutgoingEmail]) -> dict[str, Any]:
    """The JSON body for one request (all emails share one sender)."""
    mode = _mode(chunk, _Encoder())
    return {
        "from": _sender(chunk[0].from_email),
        "personalizations": [_personalization(e, mode) for e in chunk],
        "content": _chunk_content(chunk, mode),
    }


def encoded_body(chunk: Sequence[OutgoingEmail], encoder: _Encoder | None = None) -> bytes:
    """`json.dumps(mail_send_body(chunk))`, byte for byte, from the personalizations the size
    estimate already encoded (each email's JSON is built once per send)."""
    encoder = encoder or _Encoder()
    mode = _mode(chunk, encoder)
    personalizations = ", ".join(encoder.personalization(e, mode) for e in chunk)
    sender, content = json.dumps(_sender(chunk[0].from_email)), json.dumps(_chunk_content(chunk, mode))
    body = f'{{"from": {sender}, "personalizations": [{personalizations}], "content": {content}}}'
    return body.encode("ascii")


def _sender(from_email: str) -> dict[str, str]:
    sender = mailbox(from_email)
    named = {"name": sender.display_name} if sender.display_name else {}
    return {"email": sender.addr_spec, **named}


def _personalization(email: OutgoingEmail, mode: str) -> dict[str, Any]:
    block: dict[str, Any] = {
        "to": [{"email": email.recipient}],
        "subject": email.subject,
        "custom_args": {MESSAGE_ID_KEY: str(email.message_id)},
    }
    if email.headers:
        block["headers"] = dict(email.headers)
    if mode == _WHOLE:
        block["substitutions"] = {TEXT_TAG: email.text or " ", HTML_TAG: email.html}
    elif mode == _SLOTS:
        html_tags, text_tags = _tags(email.fill.template)
        block["substitutions"] = {**dict(zip(html_tags, email.fill.html, strict=True)),
                                  **dict(zip(text_tags, email.fill.text, strict=True))}
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
