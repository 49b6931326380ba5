"""Threaded HTTP server base for the fake ESPs.

Why: every provider fake needs the same plumbing (ephemeral 127.0.0.1 port,
keep-alive, fault handling, ledger bookkeeping); subclasses only describe their
wire format: routes, auth, and error bodies.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from testkit.fakes.context import StartStopContext
from testkit.fakes.faults import Fault, FaultPlan, Mode
from testkit.fakes.ledger import Ledger, LedgerEntry, Outcome
from testkit.fakes.supervisor import RefusalSupervisor

HOST = "127.0.0.1"
MAX_BODY_BYTES = 40 * 1024 * 1024  # SES v2 raw messages may be up to 40 MB
IDLE_TIMEOUT_SECONDS = 10.0  # bounds idle keep-alive handler threads


@dataclass(frozen=True)
class HttpRequest:
    """A fully read request, as seen by provider endpoints."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes

    def json(self) -> Any:
        """Decoded JSON body; raises ``ValueError`` when malformed."""
        return json.loads(self.body.decode("utf-8"))


@dataclass
class HttpReply:
    """Status, headers and body to send back."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(
        cls, status: int, payload: Any, headers: dict[str, str] | None = None
    ) -> HttpReply:
        """A reply with a JSON body and ``Content-Type: application/json``."""
        merged = {"Content-Type": "application/json"} | (headers or {})
        return cls(status, json.dumps(payload).encode(), merged)


@dataclass(frozen=True)
class Delivered:
    """What one recipient would receive, after the ESP applied its substitutions."""

    message_id: str | None
    recipient: str
    subject: str
    text: str
    html: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Accepted:
    """One recipient accepted by an endpoint, to be written to the ledger."""

    message_id: str | None
    recipient: str
    provider_message_id: str
    # Filled by endpoints only when the fake records requests (tests), never in benchmarks.
    content: Delivered | None = None


@dataclass
class Result:
    """What an endpoint did with a request."""

    reply: HttpReply
    accepted: list[Accepted] = field(default_factory=list)
    outcome: str = Outcome.ACCEPTED


Endpoint = Callable[[HttpRequest], Result]


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it (kept with ``record_requests=True``): when it arrived
    and was answered (``time.time()``, the clock the ledger stamps with), its outcome, and the
    ``Retry-After`` the answer carried, if any. Tests measure client behaviour from it (e.g. no
    request before a 429's Retry-After elapsed) rather than trusting the client's own account."""

    arrived_at: float
    answered_at: float
    outcome: str
    retry_after: int | None = None


class FakeHTTPServer(StartStopContext):
    """Base class: lifecycle, fault handling and ledger; subclasses add a wire format.

    Subclasses override :meth:`route`, :meth:`authorize`, :meth:`server_error` and
    :meth:`rate_limited`. Use as ``with FakeX() as fake: ... fake.url``.
    ``record_requests=True`` keeps every request for wire-format assertions (off by
    default so benchmarks do not grow memory).

    An ESP's search by message (Mailgun events, SendGrid Email Activity) is a
    :meth:`lookup_route`: it answers from what this fake accepted (:meth:`searchable`), past the
    fault plan (a send's scripted fault is never spent on it) and outside the ledger's request
    counts. ``lookup_refusal`` is the reply of an account that cannot use it,
    ``lookup_delay_seconds`` a slow answer, ``lookup_lag_seconds`` how long an accepted message
    stays out of the search (eventual consistency); ``lookup_requests`` counts them.
    """

    provider = "http"
    # The provider's documented request size limit; a larger body gets `too_large()` (413).
    max_body_bytes = MAX_BODY_BYTES

    def __init__(
        self,
        *,
        ledger: Ledger | None = None,
        faults: FaultPlan | None = None,
        name: str | None = None,
        port: int = 0,
        record_requests: bool = False,
    ) -> None:
        self.record_requests = record_requests
        self._received: list[HttpRequest] = []
        self._delivered: list[Delivered] = []
        self._sizes: list[int] = []  # body bytes of every request, kept even when not recording
        self._log: list[RequestRecord] = []  # only when recording: benchmarks send millions
        self._received_lock = threading.Lock()
        self.ledger = ledger if ledger is not None else Ledger()
        self.faults = faults if faults is not None else FaultPlan()
        self.name = name or self.provider
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._supervisor: RefusalSupervisor | None = None
        self._stopping = threading.Event()
        self.lookup_refusal: HttpReply | None = None
        self.lookup_delay_seconds = 0.0
        self.lookup_lag_seconds = 0.0
        self.lookup_requests = 0

    # -- lifecycle -------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (stable across refuse/reopen)."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``."""
        return f"http://{HOST}:{self._port}"

    def _before_start(self) -> None:
        self._stopping.clear()

    def _before_close(self) -> None:
        """Wake any handler sleeping in a latency/hang fault."""
        self._stopping.set()

    def _open_listener(self) -> None:
        server = _Server((HOST, self._port), self)
        self._port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                                  name=f"fake-{self.name}", daemon=True)
        thread.start()
        self._server, self._thread = server, thread

    def _close_listener(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=2)

    def request_sizes(self) -> list[int]:
        """Body size in bytes of every request seen, in order (also the refused ones)."""
        with self._received_lock:
            return list(self._sizes)

    def received(self) -> list[HttpRequest]:
        """Requests seen so far (only kept when ``record_requests=True``)."""
        with self._received_lock:
            return list(self._received)

    def request_log(self) -> list[RequestRecord]:
        """Every request answered or dropped so far, in answer order (``record_requests=True``)."""
        with self._received_lock:
            return list(self._log)

    def delivered(self) -> list[Delivered]:
        """Per accepted recipient, the message after substitutions (``record_requests=True``)."""
        with self._received_lock:
            return list(self._delivered)

    # -- subclass hooks -------------------------------------------------------------
    def route(self, method: str, path: str) -> Endpoint | None:
        """Endpoint for this method and path, or ``None`` for 404."""
        return None

    def authorize(self, request: HttpRequest) -> HttpReply | None:
        """``None`` if authorised, else the provider's 401/403 reply."""
        return None

    def server_error(self, status: int) -> HttpReply:
        """The provider's 5xx body."""
        return HttpReply.json(status, {"message": "Internal Server Error"})

    def rate_limited(self, retry_after: int) -> HttpReply:
        """The provider's 429 body (``Retry-After`` is added by the base)."""
        return HttpReply.json(429, {"message": "Too Many Requests"})

    def too_large(self) -> HttpReply:
        """The provider's 413 for a body over ``max_body_bytes``."""
        return HttpReply.json(413, {"message": "Request too large"})

    def not_found(self) -> HttpReply:
        """Reply for unknown routes."""
        return HttpReply.json(404, {"message": "Not Found"})

    def lookup_route(self, method: str, path: str) -> Endpoint | None:
        """The ESP's search by message for this method and path, or ``None``."""
        return None

    def searchable(self) -> list[LedgerEntry]:
        """What this fake accepted that its search shows: at least ``lookup_lag_seconds`` old."""
        horizon = time.time() - self.lookup_lag_seconds
        return [entry for entry in self.ledger.entries()
                if entry.provider == self.name and entry.accepted_at <= horizon]

    # -- request pipeline -----------------------------------------------------------
    def serve(self, handler: _Handler) -> None:
        """Run one request through faults, auth, the endpoint and the ledger."""
        handler.arrived_at = time.time()  # before reading the body: when the client's call landed
        request = _read_request(handler)
        with self._received_lock:
            self._sizes.append(len(request.body))
            if self.record_requests:
                self._received.append(request)
        if len(request.body) > self.max_body_bytes:
            self._finish(handler, self.too_large(), Outcome.TOO_LARGE)
            return
        if self.faults.is_refusing():
            self._drop(handler, Outcome.DROPPED)
            return
        lookup = self.lookup_route(request.method, request.path)
        if lookup is not None:
            self._serve_lookup(handler, request, lookup)
            return
        endpoint = self.route(request.method, request.path)
        if endpoint is None:
            self._finish(handler, self.not_found(), Outcome.NOT_FOUND)
            return
        fault = self.faults.decide()
        if fault.latency > 0:
            self._stopping.wait(fault.latency)
        early = self._fault_reply(fault) or self._auth_reply(request)
        if early is not None:
            self._finish(handler, *early)
            return
        result = endpoint(request)
        for item in result.accepted:
            self.ledger.record(self.name, item.message_id, item.recipient,
                               item.provider_message_id)
        with self._received_lock:
            self._delivered.extend(item.content for item in result.accepted if item.content)
        if fault.mode is Mode.ACCEPT_THEN_HANG and result.accepted:
            self._stopping.wait(fault.hang_seconds)
            self._drop(handler, Outcome.HUNG)
            return
        self._finish(handler, result.reply, result.outcome)

    def _serve_lookup(self, handler: _Handler, request: HttpRequest, endpoint: Endpoint) -> None:
        with self._received_lock:
            self.lookup_requests += 1
        if self.lookup_delay_seconds > 0:
            self._stopping.wait(self.lookup_delay_seconds)
        reply = self.authorize(request) or self.lookup_refusal or endpoint(request).reply
        self._note(handler, Outcome.LOOKUP, reply.headers.get("Retry-After"))
        _send(handler, reply)

    def _fault_reply(self, fault: Fault) -> tuple[HttpReply, str] | None:
        if fault.mode is Mode.ERROR_5XX:
            return self.server_error(fault.status), Outcome.SERVER_ERROR
        if fault.mode is Mode.RATE_LIMIT_429:
            reply = self.rate_limited(fault.retry_after)
            reply.headers["Retry-After"] = str(fault.retry_after)
            return reply, Outcome.RATE_LIMITED
        return None

    def _auth_reply(self, request: HttpRequest) -> tuple[HttpReply, str] | None:
        denial = self.authorize(request)
        return None if denial is None else (denial, Outcome.UNAUTHORIZED)

    def _finish(self, handler: _Handler, reply: HttpReply, outcome: str) -> None:
        self.ledger.count_request(outcome)
        self._note(handler, outcome, reply.headers.get("Retry-After"))
        _send(handler, reply)

    def _drop(self, handler: _Handler, outcome: str) -> None:
        # Closing without any status line is what a crashed/hung upstream looks like.
        self.ledger.count_request(outcome)
        self._note(handler, outcome, None)
        handler.close_connection = True

    def _note(self, handler: _Handler, outcome: str, retry_after: str | None) -> None:
        if not self.record_requests:
            return
        record = RequestRecord(handler.arrived_at, time.time(), outcome,
                               int(retry_after) if retry_after else None)
        with self._received_lock:
            self._log.append(record)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128  # benchmarks open many concurrent connections

    def __init__(self, address: tuple[str, int], fake: FakeHTTPServer) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a DNS lookup we do not want.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real ESP clients use
    timeout = IDLE_TIMEOUT_SECONDS
    server: _Server
    arrived_at: float = 0.0  # set per request by FakeHTTPServer.serve

    def do_POST(self) -> None:
        self.server.fake.serve(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""


def _read_request(handler: _Handler) -> HttpRequest:
    # The whole body is read even when over the limit, so the client gets the 413 rather than a
    # reset connection mid-upload (which it would have to treat as AMBIGUOUS).
    length = int(handler.headers.get("Content-Length") or 0)
    body = handler.rfile.read(length) if length > 0 else b""
    parts = urlsplit(handler.path)
    return HttpRequest(handler.command, parts.path, parse_qs(parts.query),
                       handler.headers, body)


def _send(handler: _Handler, reply: HttpReply) -> None:
    try:
        handler.send_response(reply.status)
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(reply.body)))
        handler.end_headers()
        handler.wfile.write(reply.body)
    except OSError:  # client gave up (timeout) before we answered
        handler.close_connection = True
