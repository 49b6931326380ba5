"""One POST to a receiver, connected to an address that passed the check; no redirect followed.

http.client rather than requests: the connection must go to the address checked after DNS
resolution (callbacks/addresses.py), while TLS still verifies the URL's host name (SNI and the
certificate) and the Host header names it. A 3xx is an answer like any other non-2xx: a
failure, never followed.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass

from callbacks.addresses import AddressRefusedError, IpAddress, Target, checked_addresses

MAX_ANSWER_BYTES = 64 * 1024  # what is read of the receiver's answer body (only to free the socket)


@dataclass(frozen=True)
class PostResult:
    status_code: int | None  # None: no answer
    latency_ms: int
    error: str

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, address: IpAddress, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = str(address)

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, address: IpAddress, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
        self._address = str(address)

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> PostResult:
    """POST `body` to the target's first allowed address; every failure is a result, never raised."""
    started = time.monotonic()

    def result(status: int | None, error: str = "") -> PostResult:
        return PostResult(status, int((time.monotonic() - started) * 1000), error[:500])

    try:
        address = checked_addresses(target)[0]
    except AddressRefusedError as refused:
        return result(None, f"refused: {refused}")
    kind = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    connection = kind(target, address, timeout)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read(MAX_ANSWER_BYTES)
        error = "" if 200 <= answer.status < 300 else f"HTTP {answer.status} {answer.reason}"[:200]
        if 300 <= answer.status < 400:
            error += " (redirects are not followed)"
        return result(answer.status, error)
    except TimeoutError:
        return result(None, f"timeout after {timeout:g} s")
    except (OSError, http.client.HTTPException) as failure:
        return result(None, f"{type(failure).__name__}: {failure}")
    finally:
        connection.close()
