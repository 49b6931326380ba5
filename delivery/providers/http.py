"""Shared plumbing of the HTTP providers (SendGrid, Mailgun): session, timing, classification.

Classification rules (the same for every HTTP ESP, see base.py for what each outcome means):

- 2xx: ACCEPTED.
- 429: TRANSIENT with `Retry-After` (seconds or an HTTP date, RFC 9110 section 10.2.3).
- 400 / 413 / 422: PERMANENT (the request itself is wrong: address, size, content).
- 401 / 403 / 404 / other 4xx: TRANSIENT; they describe *our account or configuration* at this
  ESP (bad key, unknown domain), not the message, so the next ESP may well take it.
- 5xx: TRANSIENT (the ESPs document 5xx as "not processed", e.g. SendGrid's errors page).
- No connection (refused, DNS, connect timeout): TRANSIENT, the request never left.
- Read timeout or a connection dropped after the body was written: AMBIGUOUS.

A kept-alive connection idle for longer than `idle_reconnect_seconds` is closed before it is
used again (`IdleLimitedAdapter`): a server that closes it at the moment we write would turn
a send into AMBIGUOUS (decision 137).

No HTTP-level retries ever happen here (`max_retries=0`): a retry after a read timeout would be
a blind second send; the failover service decides what is retried, and where.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import requests
from django.conf import settings as django_settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection as BaseHTTPConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from delivery.providers.base import (
    LookupNotEnabledError,
    LookupUnavailableError,
    Outcome,
    OutgoingEmail,
    SendResult,
)

PERMANENT_STATUSES = frozenset({400, 413, 422})
# Kept free in a size-limited request for what it carries once, whatever its recipients: the
# sender, shared content, field names and framing (the per-email sizes are upper bounds besides).
REQUEST_OVERHEAD_BYTES = 64 * 1024
_NOT_SENT_REASONS = (NewConnectionError, ConnectTimeoutError, NameResolutionError, ConnectionRefusedError)


@dataclass(frozen=True)
class HttpSettings:
    api_key: str
    base_url: str
    connect_timeout: float = 3.0
    read_timeout: float = 10.0
    pool_size: int = 16
    # A pooled connection idle longer than this is not reused (ESP_IDLE_RECONNECT_SECONDS).
    idle_reconnect_seconds: float = 4.0
    domain: str = ""  # Mailgun only
    # The ESP's documented request size limit (NOTIFIER_SENDGRID_/MAILGUN_MAX_REQUEST_BYTES); 0: none.
    max_request_bytes: int = 0


def http_settings(api_key: str, base_url: str, max_request_bytes: int, domain: str = "") -> HttpSettings:
    """An HTTP ESP's settings with the timeouts and pool size every ESP shares (ESP_* settings)."""
    return HttpSettings(
        api_key=api_key,
        base_url=base_url,
        connect_timeout=django_settings.ESP_CONNECT_TIMEOUT_SECONDS,
        read_timeout=django_settings.ESP_READ_TIMEOUT_SECONDS,
        pool_size=django_settings.ESP_POOL_SIZE,
        idle_reconnect_seconds=django_settings.ESP_IDLE_RECONNECT_SECONDS,
        domain=domain,
        max_request_bytes=max_request_bytes,
    )


@dataclass(frozen=True)
class HttpAnswer:
    """What came back from one request, already classified."""

    outcome: Outcome
    status: int = 0
    body: str = ""
    headers: dict[str, str] | None = None
    error: str = ""
    retry_after: float | None = None
    duration_ms: int = 0


def new_session(settings: HttpSettings) -> requests.Session:
    """A session for one ESP, its proxy and CA settings read from the environment once.

    requests re-reads them on every request (`trust_env`: the proxy variables with NO_PROXY,
    the CA bundle variables and ~/.netrc), ~6% of a P1 pool's samples per message through an HTTP
    ESP (decision 81). The ESP's host is fixed, so the answer is the same each time; and an ESP
    is never sent a password from ~/.netrc: it gets the key it is configured with.
    """
    session = requests.Session()
    adapter = IdleLimitedAdapter(settings.idle_reconnect_seconds, pool_connections=2,
                                 pool_maxsize=settings.pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.proxies.update(requests.utils.get_environ_proxies(settings.base_url))
    ca_bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if ca_bundle:
        session.verify = ca_bundle
    session.trust_env = False
    return session


def _idle_limited(pool_class: type[HTTPConnectionPool], idle_seconds: float) -> type:
    """`pool_class` whose connections are closed when taken after more than `idle_seconds` idle
    (the next request on one reconnects, as urllib3 does for a connection it finds dropped)."""

    class IdleLimitedPool(pool_class):  # type: ignore[valid-type,misc]
        def _get_conn(self, timeout: float | None = None) -> BaseHTTPConnection:
            conn = super()._get_conn(timeout)
            idle_since = getattr(conn, "notifier_idle_since", None)
            if idle_since is not None and time.monotonic() - idle_since > idle_seconds:
                conn.close()
            return conn

        def _put_conn(self, conn: BaseHTTPConnection | None) -> None:
            if conn is not None:
                conn.notifier_idle_since = time.monotonic()
            super()._put_conn(conn)

    return IdleLimitedPool


class IdleLimitedAdapter(HTTPAdapter):
    """An adapter that never writes a request on a connection idle longer than `idle_seconds`.

    A server closes a kept-alive connection after its own idle timeout; urllib3 notices a close
    that has already arrived, but not one that crosses our request on the wire, and a POST that
    meets it has no answer: AMBIGUOUS, held until the ESP's evidence settles it. Reconnecting
    after a shorter idle time than any server's avoids the race for the price of one handshake.
    """

    def __init__(self, idle_seconds: float, **kwargs: object) -> None:
        self.idle_seconds = idle_seconds
        super().__init__(**kwargs)  # type: ignore[arg-type]

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        super().init_poolmanager(*args, **kwargs)  # type: ignore[arg-type]
        self.poolmanager.pool_classes_by_scheme = {
            "http": _idle_limited(HTTPConnectionPool, self.idle_seconds),
            "https": _idle_limited(HTTPSConnectionPool, self.idle_seconds),
        }


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds from now; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def outcome_for_status(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.ACCEPTED
    if status in PERMANENT_STATUSES:
        return Outcome.PERMANENT
    return Outcome.TRANSIENT


def outcome_for_exception(exc: requests.RequestException) -> Outcome:
    """TRANSIENT only when the request provably never left; anything else may have landed."""
    if isinstance(exc, requests.ConnectTimeout):
        return Outcome.TRANSIENT
    if isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.ReadTimeout):
        reason = exc.args[0] if exc.args else None
        inner = getattr(reason, "reason", reason)
        if isinstance(reason, _NOT_SENT_REASONS) or isinstance(inner, _NOT_SENT_REASONS):
            return Outcome.TRANSIENT
    return Outcome.AMBIGUOUS


def post(session: requests.Session, settings: HttpSettings, url: str, **kwargs: object) -> HttpAnswer:
    """One POST, timed and classified; never raises for network trouble."""
    started = time.monotonic()
    timeout = (settings.connect_timeout, settings.read_timeout)
    try:
        response = session.post(url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        elapsed = int((time.monotonic() - started) * 1000)
        return HttpAnswer(outcome_for_exception(exc), error=f"{type(exc).__name__}: {exc}"[:500],
                          duration_ms=elapsed)
    elapsed = int((time.monotonic() - started) * 1000)
    outcome = outcome_for_status(response.status_code)
    error = "" if outcome is Outcome.ACCEPTED else response.text[:500]
    return HttpAnswer(
        outcome, response.status_code, response.text, dict(response.headers), error,
        retry_after_seconds(response.headers.get("Retry-After")), elapsed,
    )


def lookup_get(session: requests.Session, settings: HttpSettings, url: str, *, deadline: float,
               not_enabled: Callable[[requests.Response], bool], **kwargs: object) -> dict:
    """One GET of an ESP lookup in the time left before `deadline` (`time.monotonic()`): its 2xx
    JSON object. Raises LookupUnavailableError for no answer in time, a refusal (with its Retry-After)
    or an unreadable body, LookupNotEnabledError when `not_enabled(response)` says the account cannot
    use this API.

    A lookup is a read: unlike a send, a timed-out one is simply asked again later. Its timeout
    is the time left, so a slow ESP holds the caller (the recovery loop) no longer than that.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise LookupUnavailableError("no time left for the lookup")
    try:
        response = session.get(url, timeout=(min(settings.connect_timeout, left), left), **kwargs)
    except requests.RequestException as exc:
        raise LookupUnavailableError(f"{type(exc).__name__}: {exc}"[:300]) from exc
    if 200 <= response.status_code < 300:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise LookupUnavailableError(f"HTTP {response.status_code}: not a JSON object: "
                                         f"{response.text[:200]}")
        return body
    reason = f"HTTP {response.status_code}: {response.text[:300]}"
    if not_enabled(response):
        raise LookupNotEnabledError(reason)
    raise LookupUnavailableError(reason, retry_after=_retry_after(response.headers))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """`Retry-After`, or SendGrid's `X-RateLimit-Reset` (the epoch second its limit resets)."""
    seconds = retry_after_seconds(headers.get("Retry-After"))
    reset = headers.get("X-RateLimit-Reset") or ""
    if seconds is None and reset.isdigit():
        seconds = max(0.0, int(reset) - time.time())
    return seconds


def results_for_answer(
    emails: Sequence[OutgoingEmail], answer: HttpAnswer, provider_id: Callable[[OutgoingEmail], str]
) -> list[SendResult]:
    """The same answer for every email of one request."""
    code = str(answer.status) if answer.status else ""
    return [
        SendResult(
            message_id=email.message_id,
            outcome=answer.outcome,
            provider_message_id=provider_id(email) if answer.outcome is Outcome.ACCEPTED else "",
            response_code=code,
            error=answer.error,
            retry_after_seconds=answer.retry_after,
            duration_ms=answer.duration_ms,
        )
        for email in emails
    ]


def per_email_budget(max_request_bytes: int) -> int:
    """What the emails of one request may add up to under the ESP's limit; 0: no limit."""
    return max(max_request_bytes - REQUEST_OVERHEAD_BYTES, 1) if max_request_bytes else 0


def chunks_unique_recipients(
    emails: Sequence[OutgoingEmail],
    size: int,
    *,
    max_bytes: int = 0,
    bytes_of: Callable[[OutgoingEmail], int] | None = None,
) -> list[list[OutgoingEmail]]:
    """Split into requests of at most `size` emails and `max_bytes` (by `bytes_of`), never the
    same address twice in one request.

    SendGrid rejects a whole request that names one address twice ("Each unique email address
    in the personalizations array should only be included once", Mail Send errors page) and
    Mailgun keys recipient-variables by address, so a second message to the same address must
    travel in another request. The byte budget exists because 1,000 different ~34 KB bodies made
    one 34 MB request, over SendGrid's 30 MB and Mailgun's 25 MB: the ESP refuses the whole
    request (413), failing 1,000 messages that would each have been accepted. An email larger
    than the budget on its own still travels, alone.
    """
    chunks: list[list[OutgoingEmail]] = []
    seen: list[set[str]] = []
    used: list[int] = []
    for email in emails:
        address, cost = email.recipient.lower(), bytes_of(email) if max_bytes and bytes_of else 0
        for i, chunk in enumerate(chunks):
            fits = not max_bytes or used[i] + cost <= max_bytes
            if len(chunk) < size and address not in seen[i] and fits:
                chunk.append(email)
                seen[i].add(address)
                used[i] += cost
                break
        else:
            chunks.append([email])
            seen.append({address})
            used.append(cost)
    return chunks
