"""Fake Mailgun Messages API (``POST /v3/<domain>/messages``) and its events search.

Wire format: https://documentation.mailgun.com/docs/mailgun/api-reference/openapi-final/tag/Messages/
Batch sending / recipient variables:
https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/batch-sending
Events (``GET /v3/<domain>/events``, paging through ``paging.next`` until an empty page):
https://documentation.mailgun.com/docs/mailgun/user-manual/events/ ; the fake answers the
`accepted` event of every recipient it took, with its `user-variables`, filtered by ``event``,
``recipient`` (terms joined by ``OR``, quoted or not), ``begin``/``end`` (epoch seconds) and
``ascending``; anything else it does not understand is a 400, never silently ignored.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from email.parser import BytesParser
from email.policy import HTTP
from email.utils import getaddresses
from typing import Any
from urllib.parse import parse_qs

from testkit.fakes.http_base import (
    Accepted,
    Delivered,
    Endpoint,
    FakeHTTPServer,
    HttpReply,
    HttpRequest,
    Result,
)
from testkit.fakes.ledger import Outcome

# A copy of our wire key (delivery.providers.base.MESSAGE_ID_KEY), on purpose: this fake stands in
# for the ESP, which does not import our code; it reads back what the provider sends.
MESSAGE_ID_VAR = "v:notifier_message_id"
MESSAGE_ID_HEADER = "h:X-Notifier-Message-Id"  # fallback when no v: variable is sent
MAX_RECIPIENTS = 1000
MAX_REQUEST_BYTES = 25_000_000  # "The maximum message size Mailgun supports is 25MB"
DEFAULT_API_KEY = "test-mailgun-key"  # placeholder, not a secret
_ROUTE = re.compile(r"^/v3/(?P<domain>[^/]+)/messages$")
_EVENTS = re.compile(r"^/v3/(?P<domain>[^/]+)/events(?:/(?P<page>[A-Za-z0-9_=-]+))?$")
EVENTS_MAX_LIMIT = 300  # "The number of entries to return (300 max)"
_EVENT_PARAMS = {"begin", "end", "ascending", "limit", "event", "recipient", "pretty", "offset"}
_RECIPIENT_REF = re.compile(r"^%recipient\.(?P<key>[^%]+)%$")

Form = dict[str, list[str]]


class FakeMailgun(FakeHTTPServer):
    """Mailgun stand-in: basic auth ``api:<key>``, form or multipart bodies.

    ``api_key=None`` accepts any ``api`` password.
    """

    provider = "mailgun"
    max_body_bytes = MAX_REQUEST_BYTES

    def __init__(self, *, api_key: str | None = DEFAULT_API_KEY, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.api_key = api_key

    def route(self, method: str, path: str) -> Endpoint | None:
        """``POST /v3/<domain>/messages`` for any domain."""
        match = _ROUTE.match(path)
        if method != "POST" or match is None:
            return None
        domain = match["domain"]
        return lambda request: self._send(domain, request)

    def lookup_route(self, method: str, path: str) -> Endpoint | None:
        """``GET /v3/<domain>/events`` and its page URLs."""
        match = _EVENTS.match(path)
        if method != "GET" or match is None:
            return None
        return lambda request: self._events(match["domain"], match["page"], request)

    def authorize(self, request: HttpRequest) -> HttpReply | None:
        """401 ``Forbidden`` (plain text, as Mailgun does) unless ``api:<key>``."""
        scheme, _, encoded = (request.headers.get("Authorization") or "").partition(" ")
        try:
            user, _, key = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            user, key = "", ""
        if scheme == "Basic" and user == "api" and (self.api_key is None or key == self.api_key):
            return None
        return HttpReply(401, b"Forbidden", {"Content-Type": "text/plain"})

    def server_error(self, status: int) -> HttpReply:
        """5xx with Mailgun's ``{"message": ...}`` body."""
        return HttpReply.json(status, {"message": "Internal Server Error"})

    def rate_limited(self, retry_after: int) -> HttpReply:
        """429 with Mailgun's ``{"message": ...}`` body."""
        return HttpReply.json(429, {"message": "Too many requests"})

    def too_large(self) -> HttpReply:
        """413 as Mailgun answers an oversize message."""
        return HttpReply.json(413, {"message": "Request Entity Too Large"})

    def _send(self, domain: str, request: HttpRequest) -> Result:
        try:
            form = parse_form(request)
        except ValueError as exc:
            return _bad(str(exc))
        problem = _validate(form)
        if problem:
            return _bad(problem)
        recipients = _recipients(form)
        if len(recipients) > MAX_RECIPIENTS:
            return _bad(f"Too many recipients: maximum is {MAX_RECIPIENTS}")
        try:
            variables = json.loads((form.get("recipient-variables") or ["{}"])[0])
        except ValueError:
            return _bad("recipient-variables parameter is not a valid JSON")
        rejected = self.faults.rejected_among(recipients)
        if rejected:
            return Result(HttpReply.json(400, {"message": f"'to' parameter is not a valid "
                                               f"address: {rejected[0]}"}), [], Outcome.REJECTED)
        mg_id = f"<{time.strftime('%Y%m%d%H%M%S')}.{uuid.uuid4().hex[:16]}@{domain}>"
        raw_mid = (form.get(MESSAGE_ID_VAR) or form.get(MESSAGE_ID_HEADER) or [None])[0]
        accepted = [Accepted(resolve_variable(raw_mid, variables.get(r)), r, mg_id,
                             _content(form, r, variables.get(r)) if self.record_requests else None)
                    for r in recipients]
        return Result(HttpReply.json(200, {"id": mg_id, "message": "Queued. Thank you."}),
                      accepted)


    def _events(self, domain: str, page: str | None, request: HttpRequest) -> Result:
        """One page of `accepted` events; `paging.next` carries the query and the offset."""
        params = (json.loads(base64.urlsafe_b64decode(page)) if page
                  else {name: values[0] for name, values in request.query.items()})
        try:
            items = events_matching(self.searchable(), params, domain)
            limit = int(params.get("limit", 100))
            if not 1 <= limit <= EVENTS_MAX_LIMIT:
                raise ValueError(f"limit must be between 1 and {EVENTS_MAX_LIMIT}")
        except ValueError as exc:
            return _bad(str(exc))
        offset = int(params.get("offset", 0))
        chunk = items[offset:offset + limit]
        token = base64.urlsafe_b64encode(json.dumps({**params, "offset": offset + len(chunk)}).encode())
        pages = f"{self.url}/v3/{domain}/events"
        return Result(HttpReply.json(200, {"items": chunk, "paging": {
            "next": f"{pages}/{token.decode()}", "previous": pages}}))


def events_matching(entries: list[Any], params: dict[str, Any], domain: str) -> list[dict[str, Any]]:
    """The `accepted` events of these ledger entries that match the query, in time order."""
    unknown = set(params) - _EVENT_PARAMS
    if unknown:
        raise ValueError(f"this fake does not filter by {sorted(unknown)}")
    if "event" in params and "accepted" not in _terms(params["event"]):
        return []
    recipients = {t.lower() for t in _terms(params["recipient"])} if "recipient" in params else None
    begin, end = (float(params[k]) if k in params else None for k in ("begin", "end"))
    descending = params.get("ascending") == "no" or (begin is not None and end is not None and end < begin)
    low, high = (end, begin) if descending else (begin, end)
    matching = [e for e in entries if (recipients is None or e.recipient.lower() in recipients)
                and (low is None or e.accepted_at >= low) and (high is None or e.accepted_at <= high)]
    matching.sort(key=lambda e: e.accepted_at, reverse=descending)
    return [_accepted_event(e, domain) for e in matching]


def _terms(expression: str) -> list[str]:
    """The terms of `a OR "b"`; any other filter expression (AND, -term, ranges) is refused."""
    terms = re.split(r"\s+OR\s+", expression.strip())
    if not all(_TERM.fullmatch(term) and term != "AND" for term in terms):
        raise ValueError(f"filter expression {expression!r} is not supported by this fake")
    return [term.strip('"') for term in terms]


_TERM = re.compile(r'"[^"]+"|[^\s"<>-][^\s"]*')


def _accepted_event(entry: Any, domain: str) -> dict[str, Any]:
    variables = {MESSAGE_ID_VAR.removeprefix("v:"): entry.message_id} if entry.message_id else {}
    return {"event": "accepted", "id": uuid.uuid5(uuid.NAMESPACE_OID, repr(entry)).hex[:22],
            "timestamp": entry.accepted_at, "recipient": entry.recipient, "method": "http",
            "user-variables": variables, "tags": [], "flags": {"is-test-mode": False},
            "envelope": {"targets": entry.recipient, "sender": f"postmaster@{domain}"},
            "message": {"headers": {"message-id": entry.provider_message_id.strip("<>"),
                                    "to": entry.recipient}}}


def _bad(message: str) -> Result:
    return Result(HttpReply.json(400, {"message": message}), [], Outcome.BAD_REQUEST)


def _recipients(form: Form) -> list[str]:
    """Addresses from every ``to``/``cc``/``bcc`` value (repeated or comma-separated)."""
    values = [v for key in ("to", "cc", "bcc") for v in form.get(key, [])]
    return [addr for _, addr in getaddresses(values) if addr]


def _validate(form: Form) -> str | None:
    for name in ("from", "to"):
        if not form.get(name):
            return f"{name} parameter is missing"
    if not (form.get("text") or form.get("html") or form.get("template")):
        return "Need at least one of 'text', 'html' or 'template' parameters specified"
    return None


_ANY_REFERENCE = re.compile(r"%recipient\.[^%\s]+%")


def _content(form: Form, recipient: str, recipient_vars: Any) -> Delivered:
    """What `recipient` receives: subject, text, HTML and `h:` headers with its variables
    substituted, key after key, each over the result of the previous one (the pessimistic
    reading: Mailgun does not document whether a substituted value is scanned again), then
    references to unknown keys become empty strings, as Mailgun does."""
    if "recipient-variables" not in form:  # not a batch send: nothing is substituted
        parts = ((form.get(name) or [""])[0] for name in ("subject", "text", "html"))
        headers = {name[2:]: vals[0] for name, vals in form.items() if name.startswith("h:")}
        return Delivered(_literal_id(form), recipient, *parts, headers)
    values = recipient_vars if isinstance(recipient_vars, dict) else {}

    def substituted(text: str) -> str:
        for key, value in values.items():
            text = text.replace(f"%recipient.{key}%", str(value))
        return _ANY_REFERENCE.sub("", text)

    first = {name: (form.get(name) or [""])[0] for name in ("subject", "text", "html")}
    headers = {name[2:]: substituted(vals[0]) for name, vals in form.items() if name.startswith("h:")}
    mid = resolve_variable((form.get(MESSAGE_ID_VAR) or [None])[0], recipient_vars)
    return Delivered(mid, recipient, substituted(first["subject"]), substituted(first["text"]),
                     substituted(first["html"]), headers)


def _literal_id(form: Form) -> str | None:
    return (form.get(MESSAGE_ID_VAR) or form.get(MESSAGE_ID_HEADER) or [None])[0]


def resolve_variable(value: str | None, recipient_vars: Any) -> str | None:
    """Expand a whole-value ``%recipient.<key>%`` reference for one recipient."""
    if value is None:
        return None
    match = _RECIPIENT_REF.match(value)
    if match is None:
        return value
    if isinstance(recipient_vars, dict) and match["key"] in recipient_vars:
        return str(recipient_vars[match["key"]])
    return ""  # Mailgun substitutes an empty string for unknown keys


def parse_form(request: HttpRequest) -> Form:
    """Decode ``application/x-www-form-urlencoded`` or ``multipart/form-data``."""
    ctype = request.headers.get("Content-Type") or ""
    if ctype.startswith("multipart/form-data"):
        return _parse_multipart(ctype, request.body)
    if ctype.startswith("application/x-www-form-urlencoded") or not ctype:
        return parse_qs(request.body.decode("utf-8"), keep_blank_values=True)
    raise ValueError(f"Unsupported Content-Type: {ctype}")


def _parse_multipart(ctype: str, body: bytes) -> Form:
    # email's MIME parser handles multipart/form-data framing; attachments are kept
    # as raw text only when they decode, since the fake never delivers them.
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n" + body)
    if not message.is_multipart():
        raise ValueError("Malformed multipart body")
    form: Form = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name or part.get_filename():
            continue
        payload = part.get_payload(decode=True) or b""
        form.setdefault(str(name), []).append(payload.decode("utf-8", "replace"))
    return form
