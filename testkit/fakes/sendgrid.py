"""Fake SendGrid v3 Mail Send API (``POST /v3/mail/send``) and Email Activity search.

Wire format: https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send
Errors:      https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors
Activity:    https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-all-messages
             (``GET /v3/messages?query=...&limit=...``, limit 1..1000, "6 requests per minute");
             the fake understands clauses ``unique_args['<key>']="<value>"`` joined by ``OR``
             (each may be parenthesised) and answers a 400 for any other query.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import Any

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
MESSAGE_ID_ARG = "notifier_message_id"
MAX_PERSONALIZATIONS = 1000  # also the cap on to+cc+bcc recipients per request
# "The total size of your email, including attachments, must be less than 30MB" (Mail Send page).
MAX_REQUEST_BYTES = 30_000_000
DEFAULT_API_KEY = "test-sendgrid-key"  # placeholder, not a secret
ACTIVITY_MAX_LIMIT = 1000
ACTIVITY_REQUESTS_PER_MINUTE = 6  # "The current limit is 6 requests per minute"
# What SendGrid answers an account without the Email Activity add-on (sendgrid-csharp #959).
ACTIVITY_NOT_PURCHASED = {"errors": [{"field": None, "message": "access forbidden"}]}
_UNIQUE_ARG = re.compile(r"""\(?\s*unique_args\['(?P<key>[^']+)'\]\s*=\s*"(?P<value>[^"]*)"\s*\)?""")

# Error texts as listed on the SendGrid errors page (linked above).
MSG_SUBJECT = (
    "The subject is required. You can get around this requirement if you use a template "
    "with a subject defined or if every single personalization has a subject defined."
)
MSG_NO_PERSONALIZATION = "You must have at least one personalization."
MSG_TOO_MANY_PERSONALIZATIONS = (
    "The personalization block is limited to 1000 personalizations per API request. "
    "You have provided {n} personalizations."
)
MSG_TO_REQUIRED = (
    "The to parameter is required for all personalization objects, and must have at "
    "least one email object with a valid email address."
)
MSG_TOO_MANY_RECIPIENTS = "There is a limit of 1000 total recipients (to + cc + bcc) per request."
MSG_CONTENT_REQUIRED = (
    "Unless a valid template_id is provided, the content parameter is required. "
    "There must be at least one defined content block."
)
MSG_CONTENT_VALUE = "The content value must be a string at least one character in length."


def sendgrid_errors(*errors: tuple[str, str | None]) -> dict[str, Any]:
    """SendGrid's error body: ``{"errors": [{"message", "field", "help"}]}``."""
    return {"errors": [{"message": m, "field": f, "help": None} for m, f in errors]}


class FakeSendGrid(FakeHTTPServer):
    """SendGrid v3 stand-in: Bearer auth, 202 + ``X-Message-Id`` on success.

    ``api_key=None`` accepts any Bearer token.
    """

    provider = "sendgrid"
    max_body_bytes = MAX_REQUEST_BYTES

    def __init__(self, *, api_key: str | None = DEFAULT_API_KEY, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.api_key = api_key
        # The activity API's rate limit (None: none); the instants of the last minute's requests.
        self.activity_requests_per_minute: int | None = ACTIVITY_REQUESTS_PER_MINUTE
        self._activity_times: deque[float] = deque()
        self._activity_lock = threading.Lock()

    def route(self, method: str, path: str) -> Endpoint | None:
        """Only ``POST /v3/mail/send``."""
        return self._send if (method, path) == ("POST", "/v3/mail/send") else None

    def lookup_route(self, method: str, path: str) -> Endpoint | None:
        """``GET /v3/messages``: the Email Activity search."""
        return self._activity if (method, path) == ("GET", "/v3/messages") else None

    def refuse_activity(self) -> None:
        """Answer the activity API as for an account without its paid add-on (403)."""
        self.lookup_refusal = HttpReply.json(403, ACTIVITY_NOT_PURCHASED)

    def authorize(self, request: HttpRequest) -> HttpReply | None:
        """401 unless ``Authorization: Bearer <api_key>``."""
        scheme, _, token = (request.headers.get("Authorization") or "").partition(" ")
        if scheme == "Bearer" and token and (self.api_key is None or token == self.api_key):
            return None
        # Real body for a bad key, see the errors page above.
        return HttpReply.json(401, sendgrid_errors(
            ("The provided authorization grant is invalid, expired, or revoked", None)))

    def server_error(self, status: int) -> HttpReply:
        """5xx with SendGrid's error shape."""
        return HttpReply.json(status, sendgrid_errors(("Internal server error", None)))

    def rate_limited(self, retry_after: int) -> HttpReply:
        """429 as SendGrid sends it (``X-RateLimit-*`` headers, errors body)."""
        return HttpReply.json(429, sendgrid_errors(("too many requests", None)),
                              {"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "0"})

    def too_large(self) -> HttpReply:
        """413 with SendGrid's errors body (errors page: "Payload Too Large")."""
        return HttpReply.json(413, sendgrid_errors(
            ("The JSON payload you have included in your request is too large.", None)))

    def _send(self, request: HttpRequest) -> Result:
        try:
            body = request.json()
        except ValueError:
            return _bad_request([("Bad Request", None)])
        errors = validate_mail_send(body)
        if errors:
            return _bad_request(errors)
        rejected = self._rejections(body["personalizations"])
        if rejected:
            return Result(HttpReply.json(400, sendgrid_errors(*rejected)), [], Outcome.REJECTED)
        x_message_id = uuid.uuid4().hex[:22]
        contents = _contents(body) if self.record_requests else {}
        accepted = [Accepted(mid, addr, x_message_id, contents.get(addr)) for mid, addr in _recipients(body)]
        return Result(HttpReply(202, b"", {"X-Message-Id": x_message_id}), accepted)

    def _activity(self, request: HttpRequest) -> Result:
        if self._over_activity_rate():
            reset = int(time.time()) + 60
            return Result(HttpReply.json(429, sendgrid_errors(("too many requests", None)), {
                "X-RateLimit-Limit": str(self.activity_requests_per_minute), "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(reset)}), [], Outcome.RATE_LIMITED)
        try:
            wanted = unique_arg_values((request.query.get("query") or [""])[0], MESSAGE_ID_ARG)
            limit = int((request.query.get("limit") or ["10"])[0])
            if not 1 <= limit <= ACTIVITY_MAX_LIMIT:
                raise ValueError(f"limit must be between 1 and {ACTIVITY_MAX_LIMIT}")
        except ValueError as exc:
            return Result(HttpReply.json(400, {"errors": [{"message": f"invalid syntax: {exc}"}]}))
        messages = [_activity_message(entry, n) for n, entry in enumerate(self.searchable())
                    if entry.message_id in wanted]
        return Result(HttpReply.json(200, {"messages": messages[:limit]}))

    def _over_activity_rate(self) -> bool:
        if self.activity_requests_per_minute is None:
            return False
        now = time.monotonic()
        with self._activity_lock:
            while self._activity_times and self._activity_times[0] <= now - 60:
                self._activity_times.popleft()
            if len(self._activity_times) >= self.activity_requests_per_minute:
                return True
            self._activity_times.append(now)
            return False

    def _rejections(self, personalizations: list[dict[str, Any]]) -> list[tuple[str, str]]:
        found = []
        for i, pers in enumerate(personalizations):
            for j, to in enumerate(pers["to"]):
                if self.faults.is_rejected(to["email"]):
                    found.append(("Does not contain a valid address.",
                                  f"personalizations.{i}.to.{j}.email"))
        return found


def unique_arg_values(query: str, key: str) -> set[str]:
    """The values of `key` that `unique_args['key']="v" OR ...` asks for."""
    clauses = re.split(r"\s+OR\s+", query.strip())
    values = set()
    for clause in clauses:
        match = _UNIQUE_ARG.fullmatch(clause)
        if match is None:
            raise ValueError(f"{clause!r} is not a query this fake understands")
        if match["key"] == key:
            values.add(match["value"])
    return values


def _activity_message(entry: Any, n: int) -> dict[str, Any]:
    """One message as the activity API lists it (no custom args: those are in its details)."""
    at = datetime.fromtimestamp(entry.accepted_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"from_email": "", "msg_id": f"{entry.provider_message_id}.fake.{n}", "subject": "",
            "to_email": entry.recipient, "status": "processed", "opens_count": 0, "clicks_count": 0,
            "last_event_time": at}


def _bad_request(errors: list[tuple[str, str | None]]) -> Result:
    return Result(HttpReply.json(400, sendgrid_errors(*errors)), [], Outcome.BAD_REQUEST)


def _recipients(body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(our message id, address) per recipient; personalization args override top level."""
    top = (body.get("custom_args") or {}).get(MESSAGE_ID_ARG)
    pairs = []
    for pers in body["personalizations"]:
        mid = (pers.get("custom_args") or {}).get(MESSAGE_ID_ARG, top)
        for kind in ("to", "cc", "bcc"):
            pairs.extend((mid, r["email"]) for r in pers.get(kind) or [])
    return pairs


def _contents(body: dict[str, Any]) -> dict[str, Delivered]:
    """What each `to` address receives: the request's content and subject with the
    personalization's `substitutions` applied, tag after tag in the order given, each over the
    result of the previous one (the pessimistic reading: SendGrid does not document whether a
    substituted value is scanned again, so a value holding another tag would be expanded)."""
    content = {block["type"]: block["value"] for block in body.get("content") or []}
    top = (body.get("custom_args") or {}).get(MESSAGE_ID_ARG)
    delivered = {}
    for pers in body["personalizations"]:
        subs = pers.get("substitutions") or {}
        mid = (pers.get("custom_args") or {}).get(MESSAGE_ID_ARG, top)
        subject, text, html = (_substitute(v, subs) for v in (
            pers.get("subject") or body.get("subject") or "", content.get("text/plain", ""),
            content.get("text/html", "")))
        for to in pers["to"]:
            delivered[to["email"]] = Delivered(mid, to["email"], subject, text, html,
                                               dict(pers.get("headers") or {}))
    return delivered


def _substitute(value: str, substitutions: dict[str, str]) -> str:
    for tag, replacement in substitutions.items():
        value = value.replace(tag, replacement)
    return value


def validate_mail_send(body: Any) -> list[tuple[str, str | None]]:
    """Shape checks SendGrid performs before accepting; returns (message, field) pairs."""
    if not isinstance(body, dict):
        return [("Bad Request", None)]
    errors = _check_personalizations(body.get("personalizations"))
    errors += _check_email(body.get("from"), "from")
    errors += _check_custom_args(body.get("custom_args"), "custom_args")
    templated = bool(body.get("template_id"))
    pers = body.get("personalizations") if isinstance(body.get("personalizations"), list) else []
    if not templated and not body.get("subject") and not all(
        isinstance(p, dict) and p.get("subject") for p in pers
    ):
        errors.append((MSG_SUBJECT, "subject"))
    if not templated:
        errors += _check_content(body.get("content"))
    return errors


def _check_personalizations(pers: Any) -> list[tuple[str, str | None]]:
    if not isinstance(pers, list) or not pers:
        return [(MSG_NO_PERSONALIZATION, "personalizations")]
    if len(pers) > MAX_PERSONALIZATIONS:
        return [(MSG_TOO_MANY_PERSONALIZATIONS.format(n=len(pers)), "personalizations")]
    errors: list[tuple[str, str | None]] = []
    total = 0
    for i, p in enumerate(pers):
        if not isinstance(p, dict) or not isinstance(p.get("to"), list) or not p["to"]:
            errors.append((MSG_TO_REQUIRED, f"personalizations.{i}.to"))
            continue
        for kind in ("to", "cc", "bcc"):
            for j, rcpt in enumerate(p.get(kind) or []):
                total += 1
                errors += _check_email(rcpt, f"personalizations.{i}.{kind}.{j}")
        errors += _check_custom_args(p.get("custom_args"), f"personalizations.{i}.custom_args")
    if total > MAX_PERSONALIZATIONS:
        errors.append((MSG_TOO_MANY_RECIPIENTS, "personalizations"))
    return errors


def _check_email(obj: Any, field: str) -> list[tuple[str, str | None]]:
    email = obj.get("email") if isinstance(obj, dict) else None
    if not isinstance(email, str) or "@" not in email:
        return [("Does not contain a valid address.", f"{field}.email")]
    return []


def _check_custom_args(args: Any, field: str) -> list[tuple[str, str | None]]:
    if args is None:
        return []
    # custom_args values must be strings (numbers get a 400): sendgrid-nodejs issue #288.
    if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
        return [("Invalid type. Expected: object of strings.", field)]
    return []


def _check_content(content: Any) -> list[tuple[str, str | None]]:
    if not isinstance(content, list) or not content:
        return [(MSG_CONTENT_REQUIRED, "content")]
    errors: list[tuple[str, str | None]] = []
    for i, block in enumerate(content):
        value = block.get("value") if isinstance(block, dict) else None
        if not isinstance(value, str) or not value or not block.get("type"):
            errors.append((MSG_CONTENT_VALUE, f"content.{i}.value"))
    return errors
