"""Fake Amazon SES API v2: SendEmail and SendBulkEmail (rest-json protocol).

Operations: https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html
            https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendBulkEmail.html
Error shape: rest-json clients (botocore) read the code from the ``x-amzn-ErrorType``
header or the body's ``__type``/``code``, and the text from ``message``.
The authoritative shapes are in botocore's ``data/sesv2/*/service-2.json``.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Callable
from email.parser import BytesHeaderParser
from email.utils import getaddresses
from typing import Any

from testkit.fakes.http_base import (
    Accepted,
    Endpoint,
    FakeHTTPServer,
    HttpReply,
    HttpRequest,
    Result,
)
from testkit.fakes.ledger import Outcome

# A copy of our wire key (delivery.providers.base.MESSAGE_ID_KEY), on purpose: this fake stands in
# for the ESP, which does not import our code; it reads back what the provider sends.
MESSAGE_ID_TAG = "notifier_message_id"
MESSAGE_ID_HEADER = "X-Notifier-Message-Id"
MAX_RECIPIENTS = 50  # per SendEmail call (to + cc + bcc)
MAX_BULK_ENTRIES = 50  # per SendBulkEmail call
_TAG_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # MessageTag Name/Value rule


class SesError(Exception):
    """Raised inside handlers; becomes an SES v2 error reply."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


def ses_error(status: int, error_type: str, message: str) -> HttpReply:
    """SES v2 error: ``{"message", "__type"}`` body plus ``x-amzn-ErrorType`` header."""
    return HttpReply.json(status, {"message": message, "__type": error_type},
                          {"x-amzn-ErrorType": error_type, "x-amzn-RequestId": str(uuid.uuid4())})


def new_ses_message_id() -> str:
    """An id shaped like SES's (``0100<hex>-<uuid>-000000``)."""
    return f"0100{uuid.uuid4().hex[:12]}-{uuid.uuid4()}-000000"


class FakeSES(FakeHTTPServer):
    """SES v2 stand-in; works with ``boto3.client("sesv2", endpoint_url=fake.url)``.

    The SigV4 signature is not verified, only required to be present.
    """

    provider = "ses"

    def route(self, method: str, path: str) -> Endpoint | None:
        """SendEmail and SendBulkEmail routes."""
        if method != "POST":
            return None
        handler = {"/v2/email/outbound-emails": self._send_email,
                   "/v2/email/outbound-bulk-emails": self._send_bulk}.get(path)
        return None if handler is None else lambda request: _guard(handler, request)

    def authorize(self, request: HttpRequest) -> HttpReply | None:
        """403 when no SigV4 ``Authorization`` header is present."""
        if (request.headers.get("Authorization") or "").startswith("AWS4-HMAC-SHA256 "):
            return None
        return ses_error(403, "MissingAuthenticationTokenException",
                         "Missing Authentication Token")

    def server_error(self, status: int) -> HttpReply:
        """5xx as ``InternalFailure`` / ``ServiceUnavailable``."""
        kind = "ServiceUnavailable" if status == 503 else "InternalFailure"
        return ses_error(status, kind, "The request processing has failed.")

    def rate_limited(self, retry_after: int) -> HttpReply:
        """429 ``TooManyRequestsException`` (real SES sends no Retry-After; we add one)."""
        return ses_error(429, "TooManyRequestsException", "Maximum sending rate exceeded.")

    def not_found(self) -> HttpReply:
        """Unknown operation."""
        return ses_error(404, "UnknownOperationException", "Unknown operation")

    # -- SendEmail ------------------------------------------------------------------
    def _send_email(self, request: HttpRequest) -> Result:
        body = _json_object(request)
        content = body.get("Content")
        if not isinstance(content, dict):
            raise SesError(400, "BadRequestException", "Content is required")
        raw_headers = _content_headers(content)
        if not body.get("FromEmailAddress") and not raw_headers.get("From"):
            raise SesError(400, "BadRequestException", "FromEmailAddress is required")
        recipients = _destination(body.get("Destination")) or _raw_recipients(raw_headers)
        if not recipients:
            raise SesError(400, "BadRequestException", "Missing required recipients")
        if len(recipients) > MAX_RECIPIENTS:
            raise SesError(400, "BadRequestException", "Recipient count exceeds 50.")
        tags = _tags(body.get("EmailTags"))
        message_id = tags.get(MESSAGE_ID_TAG) or raw_headers.get(MESSAGE_ID_HEADER)
        rejected = self.faults.rejected_among(recipients)
        if rejected:
            raise SesError(400, "MessageRejected", _not_verified(rejected))
        ses_id = new_ses_message_id()
        accepted = [Accepted(message_id, r, ses_id) for r in recipients]
        return Result(HttpReply.json(200, {"MessageId": ses_id}), accepted)

    # -- SendBulkEmail --------------------------------------------------------------
    def _send_bulk(self, request: HttpRequest) -> Result:
        body = _json_object(request)
        template = (body.get("DefaultContent") or {}).get("Template")
        if not isinstance(template, dict) or not (
            template.get("TemplateName") or template.get("TemplateArn")
            or template.get("TemplateContent")
        ):
            raise SesError(400, "BadRequestException", "DefaultContent.Template is required")
        entries = body.get("BulkEmailEntries")
        if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_BULK_ENTRIES:
            raise SesError(400, "BadRequestException",
                           f"BulkEmailEntries must contain 1 to {MAX_BULK_ENTRIES} entries")
        default_tags = _tags(body.get("DefaultEmailTags"))
        results, accepted = [], []
        for entry in entries:
            result, items = self._bulk_entry(entry, default_tags)
            results.append(result)
            accepted += items
        ok = sum(r["Status"] == "SUCCESS" for r in results)
        outcome = (Outcome.ACCEPTED if ok == len(results)
                   else Outcome.PARTIAL if ok else Outcome.REJECTED)
        return Result(HttpReply.json(200, {"BulkEmailEntryResults": results}), accepted, outcome)

    def _bulk_entry(
        self, entry: Any, default_tags: dict[str, str]
    ) -> tuple[dict[str, str], list[Accepted]]:
        recipients = _destination(entry.get("Destination") if isinstance(entry, dict) else None)
        if not recipients:
            raise SesError(400, "BadRequestException", "Each entry needs a Destination")
        rejected = self.faults.rejected_among(recipients)
        if rejected:
            # Per-entry failure, the rest of the batch still goes out.
            return {"Status": "MESSAGE_REJECTED", "Error": _not_verified(rejected)}, []
        tags = default_tags | _tags(entry.get("ReplacementTags"))
        ses_id = new_ses_message_id()
        items = [Accepted(tags.get(MESSAGE_ID_TAG), r, ses_id) for r in recipients]
        return {"Status": "SUCCESS", "MessageId": ses_id}, items


def _guard(handler: Callable[[HttpRequest], Result], request: HttpRequest) -> Result:
    try:
        return handler(request)
    except SesError as err:
        outcome = Outcome.REJECTED if err.error_type == "MessageRejected" else Outcome.BAD_REQUEST
        return Result(ses_error(err.status, err.error_type, err.message), [], outcome)


def _json_object(request: HttpRequest) -> dict[str, Any]:
    try:
        body = request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise SesError(400, "BadRequestException", "Request body is not a JSON object")
    return body


def _destination(dest: Any) -> list[str]:
    if not isinstance(dest, dict):
        return []
    keys = ("ToAddresses", "CcAddresses", "BccAddresses")
    return [addr for _, addr in getaddresses([a for k in keys for a in dest.get(k) or []])
            if addr]


def _content_headers(content: dict[str, Any]) -> dict[str, str]:
    """Validate Simple/Raw/Template content; returns Raw's headers (else empty)."""
    if "Raw" in content:
        try:
            data = base64.b64decode((content["Raw"] or {}).get("Data") or "", validate=True)
        except (binascii.Error, AttributeError) as exc:
            raise SesError(400, "BadRequestException", "Raw.Data is not base64") from exc
        if not data:
            raise SesError(400, "BadRequestException", "Raw.Data is empty")
        headers = BytesHeaderParser().parsebytes(data)
        return {k: str(v) for k, v in headers.items()}
    simple = content.get("Simple")
    if isinstance(simple, dict):
        if not (simple.get("Subject") or {}).get("Data") or not simple.get("Body"):
            raise SesError(400, "BadRequestException", "Simple needs Subject and Body")
        return {}
    if isinstance(content.get("Template"), dict):
        return {}
    raise SesError(400, "BadRequestException", "Content must have Simple, Raw or Template")


def _raw_recipients(headers: dict[str, str]) -> list[str]:
    values = [headers[k] for k in ("To", "Cc") if k in headers]
    return [addr for _, addr in getaddresses(values) if addr]


def _tags(tags: Any) -> dict[str, str]:
    if tags is None:
        return {}
    if not isinstance(tags, list):
        raise SesError(400, "BadRequestException", "Tags must be a list")
    out = {}
    for tag in tags:
        name, value = (tag.get("Name"), tag.get("Value")) if isinstance(tag, dict) else (None, None)
        if not (isinstance(name, str) and isinstance(value, str)
                and _TAG_RE.match(name) and _TAG_RE.match(value)):
            # Tag names/values may only hold ASCII letters, digits, '_' and '-'.
            raise SesError(400, "BadRequestException", f"Invalid message tag: {tag!r}")
        out[name] = value
    return out


def _not_verified(addresses: list[str]) -> str:
    return ("Email address is not verified. The following identities failed the check "
            f"in region US-EAST-1: {', '.join(addresses)}")
