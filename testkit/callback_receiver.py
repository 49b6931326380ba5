"""A service's callback receiver on 127.0.0.1, for the tests and the benchmark of callbacks/.

A threaded http.server that records every POST (headers, body, the status it answered) and
answers what the test sets: 200, another status, or after a delay (a slow receiver). `stop()`
closes it (a dead receiver: connection refused); `start()` again on the same port revives it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from testkit.ports import free_port


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    status: int
    at: float

    def events(self) -> list[dict[str, Any]]:
        return json.loads(self.body)["events"]


class CallbackReceiver:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.status = 200
        self.delay_seconds = 0.0
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> CallbackReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.delay_seconds:
                    time.sleep(receiver.delay_seconds)
                status = receiver.status
                with receiver._lock:
                    receiver.received.append(Received({k.lower(): v for k, v in self.headers.items()},
                                                      body, status, time.monotonic()))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="callback-receiver")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> CallbackReceiver:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def requests(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def accepted_event_ids(self) -> list[int]:
        """Every event id of every request answered 2xx, duplicates included, in arrival order."""
        return [int(event["id"]) for r in self.requests() if 200 <= r.status < 300 for event in r.events()]

    def wait_for_events(self, count: int, timeout: float = 30.0) -> list[int]:
        """The distinct accepted event ids once at least `count` arrived (or the timeout)."""
        deadline = time.monotonic() + timeout
        while len(set(ids := self.accepted_event_ids())) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return ids
