"""Where SNS signing certificates come from, and which URLs may be trusted.

AWS: "Verifying the signatures of Amazon SNS messages" (SNS developer guide) says to always
fetch the certificate over HTTPS and to verify it was served by Amazon SNS. An attacker
controls ``SigningCertURL`` (it is inside the unauthenticated body), so the URL is checked
against the SNS endpoint patterns *before* anything is fetched: otherwise anyone could make
us trust their own certificate, or use us to probe internal hosts (SSRF).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import requests

from delivery.providers.webhooks.errors import Reason, WebhookVerificationError

# SNS regional endpoints (AWS general reference, "Amazon SNS endpoints and quotas"):
#   commercial and GovCloud: sns.<region>.amazonaws.com  (e.g. sns.us-gov-west-1.amazonaws.com)
#   China:                   sns.<region>.amazonaws.com.cn (e.g. sns.cn-north-1.amazonaws.com.cn)
# Region names are lowercase letters/digits/hyphens; anchored so "sns.x.amazonaws.com.evil.io"
# and "evil-sns.us-east-1.amazonaws.com" fail.
DEFAULT_CERT_HOST_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"sns\.[a-z]{2}(?:-[a-z]+)+-\d+\.amazonaws\.com"),
    re.compile(r"sns\.cn-[a-z]+-\d+\.amazonaws\.com\.cn"),
)

DEFAULT_FETCH_TIMEOUT = 3.0  # seconds; a webhook request must not hang on a slow fetch
DEFAULT_MAX_CERT_BYTES = 16 * 1024  # a PEM certificate is ~2 KiB; cap what we read
DEFAULT_CACHE_TTL = 3600.0  # seconds; SNS rotates its signing cert rarely


def validate_signing_cert_url(
    url: str, host_patterns: Iterable[re.Pattern[str]] = DEFAULT_CERT_HOST_PATTERNS
) -> None:
    """Raise :class:`WebhookVerificationError` unless ``url`` is an SNS signing-cert URL."""
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise WebhookVerificationError(Reason.CERT_URL_NOT_HTTPS, url)
    # .hostname is lowercased; reject userinfo and non-default ports, which the genuine
    # SNS URLs never carry and which could smuggle a different target past the regex.
    host = parts.hostname or ""
    has_extras = parts.username is not None or parts.password is not None
    if has_extras or _port(parts) not in (None, 443):
        raise WebhookVerificationError(Reason.CERT_HOST_NOT_ALLOWED, url)
    if not any(p.fullmatch(host) for p in host_patterns):
        raise WebhookVerificationError(Reason.CERT_HOST_NOT_ALLOWED, host)
    if not parts.path.endswith(".pem") or parts.query or parts.fragment:
        raise WebhookVerificationError(Reason.CERT_PATH_NOT_ALLOWED, url)


def _port(parts: Any) -> int | None:
    try:
        return parts.port
    except ValueError:  # non-numeric or out-of-range port
        return -1


class CertificateStore(Protocol):
    """Returns the PEM bytes for a signing-certificate URL already known to be allowed."""

    def get(self, url: str) -> bytes: ...


class StaticCertificateStore:
    """Pre-seeded url -> PEM mapping (tests, or pinning certificates in config).

    Records every URL it is asked for in ``requested`` so tests can assert that a
    rejected message never reached the store.
    """

    def __init__(self, certificates: Mapping[str, bytes] | None = None) -> None:
        self._certificates = dict(certificates or {})
        self.requested: list[str] = []

    def add(self, url: str, pem: bytes) -> None:
        self._certificates[url] = pem

    def get(self, url: str) -> bytes:
        self.requested.append(url)
        try:
            return self._certificates[url]
        except KeyError:
            raise WebhookVerificationError(Reason.CERT_FETCH_FAILED, f"unknown {url}") from None


class HttpsCertificateStore:
    """Fetches certificates over HTTPS (TLS-verified by requests) with an in-memory TTL cache.

    Thread-safe; one instance per process is intended. Re-validates each URL itself so the
    store stays safe even if a caller forgets to.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_FETCH_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_CERT_BYTES,
        ttl: float = DEFAULT_CACHE_TTL,
        session: requests.Session | None = None,
        host_patterns: Iterable[re.Pattern[str]] = DEFAULT_CERT_HOST_PATTERNS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._ttl = ttl
        self._session = session or requests.Session()
        self._host_patterns = tuple(host_patterns)
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, bytes]] = {}
        self._lock = threading.Lock()

    def get(self, url: str) -> bytes:
        validate_signing_cert_url(url, self._host_patterns)
        now = self._monotonic()
        with self._lock:
            hit = self._cache.get(url)
            if hit is not None and hit[0] > now:
                return hit[1]
        pem = self._fetch(url)
        with self._lock:
            self._cache[url] = (now + self._ttl, pem)
        return pem

    def _fetch(self, url: str) -> bytes:
        try:
            # No redirects: a redirect could lead anywhere, defeating the host check.
            with self._session.get(
                url, timeout=self._timeout, stream=True, allow_redirects=False
            ) as resp:
                if resp.status_code != 200:
                    raise WebhookVerificationError(
                        Reason.CERT_FETCH_FAILED, f"HTTP {resp.status_code}"
                    )
                return self._read_capped(resp)
        except requests.RequestException as err:
            raise WebhookVerificationError(Reason.CERT_FETCH_FAILED, str(err)) from err

    def _read_capped(self, resp: requests.Response) -> bytes:
        body = bytearray()
        for chunk in resp.iter_content(chunk_size=4096):
            body.extend(chunk)
            if len(body) > self._max_bytes:
                raise WebhookVerificationError(Reason.CERT_FETCH_FAILED, "certificate too large")
        return bytes(body)
