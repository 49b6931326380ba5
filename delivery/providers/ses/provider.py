"""Amazon SES API v2 through boto3 (`sesv2`): SendEmail, and SendBulkEmail where content allows.

SendBulkEmail sends one template to up to 50 destinations per call, each with its own
`ReplacementTags`, `ReplacementHeaders` and `ReplacementTemplateData`
(https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendBulkEmail.html). With inline
template content "Amazon SES supports only simple substitutions" and its escaping of values in
the HTML part is not documented, so we do not ship rendered HTML as replacement data: a batch
goes through SendBulkEmail only when every message has the same subject, text and HTML (a
broadcast) and that content holds no `{{` a template engine would interpret. Everything else
goes through SendEmail, one call per message (SES accepts up to 50 recipients per call, but
they would all share one body).

Our id travels as the message tag `notifier_message_id` (tags may only hold ASCII letters,
digits, `_` and `-`; an integer id qualifies). SES returns tags in every event's `mail.tags`.

Addresses: SES wants Punycode domains and MIME encoded-word display names ("If the domain part
contains non-ASCII characters, it must be encoded using Punycode ... the local part ... can
contain only 7-bit ASCII characters", SendEmail's FromEmailAddress and Destination); every
address goes through addresses.py first, and one that cannot be encoded fails alone.

botocore's own retries are switched off (`total_max_attempts=1`): a retry after a read timeout
would be a blind second send. Errors: https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from delivery.providers.addresses import mailbox, wire_emails
from delivery.providers.base import MESSAGE_ID_KEY, Journal, Outcome, OutgoingEmail, Provider, SendResult
from delivery.providers.http import chunks_unique_recipients, retry_after_seconds

MAX_BULK = 50
PERMANENT_CODES = frozenset({"MessageRejected", "BadRequestException", "InvalidParameterValue"})
# Per-entry statuses of SendBulkEmail that are about the message, not the account.
PERMANENT_BULK_STATUSES = frozenset({"MESSAGE_REJECTED", "INVALID_PARAMETER"})


@dataclass(frozen=True)
class SesSettings:
    region: str
    access_key_id: str = ""
    secret_access_key: str = ""
    endpoint_url: str = ""
    connect_timeout: float = 3.0
    read_timeout: float = 10.0
    pool_size: int = 16


class SesProvider(Provider):
    name = "ses"

    def __init__(self, settings: SesSettings):
        self._executor = ThreadPoolExecutor(max_workers=settings.pool_size, thread_name_prefix="ses")
        self.client = boto3.client(
            "sesv2",
            region_name=settings.region,
            endpoint_url=settings.endpoint_url or None,
            aws_access_key_id=settings.access_key_id or None,
            aws_secret_access_key=settings.secret_access_key or None,
            config=Config(
                connect_timeout=settings.connect_timeout,
                read_timeout=settings.read_timeout,
                retries={"total_max_attempts": 1, "mode": "standard"},
                max_pool_connections=settings.pool_size,
            ),
        )

    def send_batch(self, emails: Sequence[OutgoingEmail], journal: Journal | None = None) -> list[SendResult]:
        ready, refused = wire_emails(emails)
        by_id = {result.message_id: result for result in refused}
        by_id.update((result.message_id, result) for result in self._send_ready(ready))
        return [by_id[email.message_id] for email in emails]

    def _send_ready(self, emails: Sequence[OutgoingEmail]) -> list[SendResult]:
        if not emails:
            return []
        if len(emails) > 1 and bulk_eligible(emails):
            results: list[SendResult] = []
            for chunk in chunks_unique_recipients(emails, MAX_BULK):
                results.extend(self._send_bulk(chunk))
            by_id = {r.message_id: r for r in results}
            return [by_id[e.message_id] for e in emails]
        if len(emails) == 1:
            return [self._send_one(emails[0])]
        # One SendEmail per message: run them side by side (boto3 clients are thread-safe and
        # pool `pool_size` connections), so a batch of 100 costs ~1/pool_size of the round trips.
        return list(self._executor.map(self._send_one, emails))

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def _send_one(self, email: OutgoingEmail) -> SendResult:
        request = {
            "FromEmailAddress": mailbox(email.from_email).formatted(),
            "Destination": {"ToAddresses": [email.recipient]},
            "Content": {"Simple": _simple_content(email)},
            "EmailTags": [{"Name": MESSAGE_ID_KEY, "Value": str(email.message_id)}],
        }
        started = time.monotonic()
        outcome, answer = _call(self.client.send_email, request)
        duration = int((time.monotonic() - started) * 1000)
        if outcome.outcome is Outcome.ACCEPTED:
            return SendResult(email.message_id, Outcome.ACCEPTED, answer.get("MessageId", ""), "200",
                              duration_ms=duration)
        return _failed(email, outcome, duration)

    def _send_bulk(self, chunk: list[OutgoingEmail]) -> list[SendResult]:
        first = chunk[0]
        request = {
            "FromEmailAddress": mailbox(first.from_email).formatted(),
            "DefaultContent": {"Template": {
                "TemplateContent": {"Subject": first.subject, "Text": first.text, "Html": first.html},
                "TemplateData": "{}",
            }},
            "BulkEmailEntries": [_bulk_entry(email) for email in chunk],
        }
        started = time.monotonic()
        outcome, answer = _call(self.client.send_bulk_email, request)
        duration = int((time.monotonic() - started) * 1000)
        if outcome.outcome is not Outcome.ACCEPTED:
            return [_failed(email, outcome, duration) for email in chunk]
        entries = answer.get("BulkEmailEntryResults") or []
        return [_entry_result(email, entry, duration) for email, entry in zip(chunk, entries, strict=True)]


@dataclass(frozen=True)
class _CallOutcome:
    outcome: Outcome
    code: str = ""
    error: str = ""
    retry_after: float | None = None


def bulk_eligible(emails: Sequence[OutgoingEmail]) -> bool:
    first = emails[0]
    content = (first.from_email, first.subject, first.text, first.html)
    if any("{{" in part for part in content[1:]):
        return False
    return all((e.from_email, e.subject, e.text, e.html) == content for e in emails)


def _call(operation: Any, request: dict[str, Any]) -> tuple[_CallOutcome, dict[str, Any]]:
    try:
        return _CallOutcome(Outcome.ACCEPTED), operation(**request)
    except ClientError as exc:
        return _classify_client_error(exc), {}
    except (EndpointConnectionError, ConnectTimeoutError) as exc:
        return _CallOutcome(Outcome.TRANSIENT, error=f"{type(exc).__name__}: {exc}"), {}
    except BotoCoreError as exc:
        # ReadTimeoutError, ConnectionClosedError, ...: the request may have been taken.
        return _CallOutcome(Outcome.AMBIGUOUS, error=f"{type(exc).__name__}: {exc}"), {}


def _classify_client_error(exc: ClientError) -> _CallOutcome:
    error = exc.response.get("Error") or {}
    metadata = exc.response.get("ResponseMetadata") or {}
    status = int(metadata.get("HTTPStatusCode") or 0)
    code = str(error.get("Code") or status)
    message = f"{code}: {error.get('Message', '')}"[:500]
    # Account-level 400s (SendingPausedException, LimitExceededException, AccountSuspended...)
    # are about this ESP, not the message: TRANSIENT, so the next ESP can take it.
    if code in PERMANENT_CODES:
        return _CallOutcome(Outcome.PERMANENT, str(status or code), message)
    retry_after = retry_after_seconds((metadata.get("HTTPHeaders") or {}).get("retry-after"))
    return _CallOutcome(Outcome.TRANSIENT, str(status or code), message, retry_after)


def _failed(email: OutgoingEmail, outcome: _CallOutcome, duration: int) -> SendResult:
    return SendResult(email.message_id, outcome.outcome, "", outcome.code, outcome.error,
                      outcome.retry_after, duration)


def _entry_result(email: OutgoingEmail, entry: dict[str, Any], duration: int) -> SendResult:
    status = str(entry.get("Status") or "")
    if status == "SUCCESS":
        return SendResult(email.message_id, Outcome.ACCEPTED, entry.get("MessageId", ""), "200",
                          duration_ms=duration)
    outcome = Outcome.PERMANENT if status in PERMANENT_BULK_STATUSES else Outcome.TRANSIENT
    return SendResult(email.message_id, outcome, "", status, str(entry.get("Error") or "")[:500],
                      None, duration)


def _headers(email: OutgoingEmail) -> list[dict[str, str]]:
    return [{"Name": name, "Value": value} for name, value in email.headers.items()]


def _simple_content(email: OutgoingEmail) -> dict[str, Any]:
    body: dict[str, Any] = {"Text": {"Data": email.text or " ", "Charset": "UTF-8"}}
    if email.html:
        body["Html"] = {"Data": email.html, "Charset": "UTF-8"}
    content: dict[str, Any] = {"Subject": {"Data": email.subject, "Charset": "UTF-8"}, "Body": body}
    if email.headers:
        content["Headers"] = _headers(email)
    return content


def _bulk_entry(email: OutgoingEmail) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Destination": {"ToAddresses": [email.recipient]},
        "ReplacementTags": [{"Name": MESSAGE_ID_KEY, "Value": str(email.message_id)}],
        "ReplacementEmailContent": {"ReplacementTemplate": {"ReplacementTemplateData": json.dumps({})}},
    }
    if email.headers:
        entry["ReplacementHeaders"] = _headers(email)
    return entry
