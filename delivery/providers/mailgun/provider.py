"""Mailgun Messages API (`POST /v3/<domain>/messages`): batch sends of up to 1000 recipients.

Batch sending: every recipient is a `to`, and `recipient-variables` (JSON keyed by address)
makes Mailgun send each recipient an individual message and fill `%recipient.<key>%` in it
(https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/batch-sending;
"The maximum number of recipients allowed for Batch Sending is 1,000"). Without
recipient-variables every recipient would see all the others in To, so they are always sent.

Our id travels as the custom variable `v:notifier_message_id`, set per recipient through
`%recipient.notifier_message_id%`; Mailgun returns `v:` variables in every event's
`user-variables`, which is where the webhook normaliser reads it. When the rendered subject or
bodies differ between recipients they travel the same way (`%recipient.subject%`, ...), and so do
per-recipient headers (`h:List-Unsubscribe=%recipient.h_0%`): recipient values are substituted
"virtually anywhere in the message (including header fields and other parameters)", which is
also how django-anymail maps merge_metadata and merge_headers for Mailgun. Every recipient gets
every key (a missing one would be substituted with an empty string).

Addresses: recipients travel with IDNA domains (addresses.wire_emails), `from` as
`"Name" <addr>` with the name RFC 2047 encoded on its own. A request stays under
`max_request_bytes` (NOTIFIER_MAILGUN_MAX_REQUEST_BYTES, the documented 25 MB message size limit): each
recipient counts its `to` field and its recipient-variables entry as if every part varied, as
they are URL-encoded on the wire, an upper bound of what it adds.

A 400 rejects the whole request (e.g. one invalid `to`); nothing was queued, so the request is
split in halves and sent again until the bad recipients stand alone (about 2 log2(n) calls for
one bad address in 1000, instead of 1000).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache

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
    HttpSettings,
    chunks_unique_recipients,
    new_session,
    per_email_budget,
    post,
    results_for_answer,
)
from delivery.providers.mailgun.lookup import API as LOOKUP_API
from delivery.providers.mailgun.lookup import events_lookup
from delivery.providers.substitution import content_holds, substitutable_template
from templates.slots import SlotTemplate

MAX_PER_REQUEST = 1000
_PARTS = ("subject", "text", "html")
# What quote_plus leaves as one octet (urllib.parse's unreserved set, and space as `+`).
_FORM_SAFE_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~ "


class MailgunProvider(Provider):
    name = "mailgun"
    lookup_api = LOOKUP_API

    def __init__(self, settings: HttpSettings):
        self.settings = settings
        self.url = f"{settings.base_url.rstrip('/')}/v3/{settings.domain}/messages"
        self.session = new_session(settings)
        self.auth = ("api", settings.api_key)

    def send_batch(self, emails: Sequence[OutgoingEmail], journal: Journal | None = None) -> list[SendResult]:
        ready, refused = wire_emails(emails)
        by_id = {result.message_id: result for result in refused}
        groups: dict[tuple[str, SlotTemplate | None], list[OutgoingEmail]] = {}
        for email in ready:
            if _holds_reference(email):  # alone, without recipient variables: nothing substituted
                by_id.update((r.message_id, r) for r in self._send_chunk([email]))
                continue
            groups.setdefault((email.from_email, _slot_template(email)), []).append(email)
        budget = per_email_budget(self.settings.max_request_bytes)
        for (_, template), group in groups.items():
            group_budget = max(budget - _shared_bytes(template), 1) if budget and template else budget
            for chunk in chunks_unique_recipients(group, MAX_PER_REQUEST, max_bytes=group_budget,
                                                  bytes_of=_recipient_bytes):
                for result in self._send_chunk(chunk):
                    by_id[result.message_id] = result
        return [by_id[email.message_id] for email in emails]

    def close(self) -> None:
        self.session.close()

    def offers_lookup(self) -> bool:
        return bool(self.settings.api_key and self.settings.domain)

    def lookup(self, queries: Sequence[LookupQuery], *, timeout: float) -> LookupAnswers:
        """Our ids among the domain's `accepted` events (mailgun/lookup.py)."""
        return events_lookup(self.session, self.settings, queries, timeout=timeout)

    def _send_chunk(self, chunk: list[OutgoingEmail]) -> list[SendResult]:
        answer = post(self.session, self.settings, self.url, data=form_body(message_form(chunk)),
                      auth=self.auth, headers=_FORM_HEADERS)
        if answer.outcome is Outcome.PERMANENT and len(chunk) > 1 and _names_recipient(answer.body):
            middle = len(chunk) // 2
            return self._send_chunk(chunk[:middle]) + self._send_chunk(chunk[middle:])
        mailgun_id = _message_id(answer.body) if answer.outcome is Outcome.ACCEPTED else ""
        return results_for_answer(chunk, answer, lambda _: mailgun_id)


def _slot_template(email: OutgoingEmail) -> SlotTemplate | None:
    """The slot template this email can travel with as recipient variables, or None.

    Mailgun substitutes `%recipient.<key>%` "virtually anywhere in the message" and does not
    document whether a substituted value is scanned again, so a message whose subject, values or
    headers hold `%recipient` keeps the whole-part path (as every message did before)."""
    return substitutable_template(email, _REFERENCE)


_REFERENCE = "%recipient"


@lru_cache(maxsize=64)
def _slot_keys(template: SlotTemplate) -> tuple[list[str], list[str]]:
    nonce = template.nonce
    return ([f"{nonce}h{i}" for i in range(len(template.html.names))],
            [f"{nonce}t{i}" for i in range(len(template.text.names))])


@lru_cache(maxsize=64)
def _slot_parts(template: SlotTemplate) -> tuple[str, str]:
    """(text, HTML) with a `%recipient.<key>%` reference in every slot."""
    html_keys, text_keys = _slot_keys(template)
    return (template.text.join(tuple(f"%recipient.{k}%" for k in text_keys)),
            template.html.join(tuple(f"%recipient.{k}%" for k in html_keys)))


def _shared_bytes(template: SlotTemplate) -> int:
    return sum(_form_encoded_len(part) for part in _slot_parts(template))


def _holds_reference(email: OutgoingEmail) -> bool:
    """Content that holds `%recipient` itself: in a batch Mailgun would substitute it."""
    return content_holds(email, (_REFERENCE,))


def _literal_form(email: OutgoingEmail) -> list[tuple[str, str]]:
    """One recipient without recipient-variables (no batch, so no substitution at all)."""
    form = [("from", mailbox(email.from_email).formatted()), ("to", email.recipient)]
    form += [(part, getattr(email, part)) for part in _PARTS if getattr(email, part)]
    form += [(f"h:{name}", value) for name, value in email.headers.items()]
    form.append((f"v:{MESSAGE_ID_KEY}", str(email.message_id)))
    return form


def message_form(chunk: Sequence[OutgoingEmail]) -> list[tuple[str, str]]:
    """Form fields for one batch request (all emails share one sender).

    When every email shares one slot template, text and HTML travel once with a reference per
    slot and each recipient's escaped values as recipient variables."""
    first = chunk[0]
    if len(chunk) == 1 and _holds_reference(first):
        return _literal_form(first)
    template = _slot_template(first)
    slots = template is not None and all(_slot_template(e) is template for e in chunk)
    parts = ("subject",) if slots else _PARTS
    varying = [p for p in parts if any(getattr(e, p) != getattr(first, p) for e in chunk)]
    header_names = sorted({name for e in chunk for name in e.headers})
    variables = {e.recipient: _variables(e, varying, header_names, slots) for e in chunk}
    form = [("from", mailbox(first.from_email).formatted())]
    form += [("to", e.recipient) for e in chunk]
    shared = dict(zip(("text", "html"), _slot_parts(template), strict=True)) if slots else {}
    for part in _PARTS:
        value = shared.get(part) or (f"%recipient.{part}%" if part in varying else getattr(first, part))
        if value:
            form.append((part, value))
    form += [(f"h:{name}", f"%recipient.h_{i}%") for i, name in enumerate(header_names)]
    form.append((f"v:{MESSAGE_ID_KEY}", f"%recipient.{MESSAGE_ID_KEY}%"))
    form.append(("recipient-variables", json.dumps(variables, separators=(",", ":"))))
    return form


def _variables(email: OutgoingEmail, varying: list[str], header_names: list[str],
               slots: bool = False) -> dict[str, str]:
    values = {MESSAGE_ID_KEY: str(email.message_id)}
    values.update({part: getattr(email, part) for part in varying})
    values.update({f"h_{i}": email.headers.get(name, "") for i, name in enumerate(header_names)})
    if slots:
        html_keys, text_keys = _slot_keys(email.fill.template)
        values.update(zip(html_keys, email.fill.html, strict=True))
        values.update(zip(text_keys, email.fill.text, strict=True))
    return values


def _recipient_bytes(email: OutgoingEmail) -> int:
    """What one recipient adds to the form body: `to=<addr>&` and its recipient-variables entry
    (with every part varying, or its slot values and subject for a slot email)."""
    headers = sorted(email.headers)
    slots = _slot_template(email) is not None
    parts = ["subject"] if slots else list(_PARTS)
    entry = json.dumps({email.recipient: _variables(email, parts, headers, slots)}, separators=(",", ":"))
    return len("to=&,") + _form_encoded_len(email.recipient) + _form_encoded_len(entry)


def _form_encoded_len(text: str) -> int:
    """len(quote_plus(text)) without building it (quote_plus cost ~60 us a recipient): every
    UTF-8 byte outside the unreserved set becomes `%XX`, three octets."""
    raw = text.encode("utf-8")
    return len(raw) + 2 * len(raw.translate(None, _FORM_SAFE_BYTES))


_FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}
# quote_plus as one str.translate over the UTF-8 bytes seen as Latin-1: quote_plus walks a
# 1,000-recipient body byte by byte in Python (~40% of the adapter's CPU with slot values).
_FORM_TABLE = {byte: "+" if byte == 0x20 else chr(byte) if byte in _FORM_SAFE_BYTES else f"%{byte:02X}"
               for byte in range(256)}


def _form_quote(text: str) -> str:
    return text.encode("utf-8").decode("latin-1").translate(_FORM_TABLE)


def form_body(fields: list[tuple[str, str]]) -> bytes:
    """`urllib.parse.urlencode(fields)` (what requests sends for `data=fields`), byte for byte."""
    return "&".join(f"{_form_quote(name)}={_form_quote(value)}" for name, value in fields).encode("ascii")


def _message_id(body: str) -> str:
    try:
        return str(json.loads(body).get("id") or "").strip("<>")
    except (ValueError, AttributeError):
        return ""


def _names_recipient(body: str) -> bool:
    """A 400 about a recipient (worth splitting) rather than about the request's shape."""
    lowered = body.lower()
    return "address" in lowered or "'to'" in lowered
