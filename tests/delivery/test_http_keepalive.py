"""A kept-alive ESP connection is not reused after a long idle (decision 137).

An ESP closes an idle kept-alive connection after its own timeout. urllib3 notices a close that
has already arrived, but a close that crosses our request on the wire leaves a POST without an
answer: AMBIGUOUS, held until the ESP's evidence settles it (the 429 storm test met it with a
fake whose idle timeout equalled the Retry-After it waited out). The stand-in here is that race
made certain: it answers the first request on each connection and closes at the next one.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.http import HttpSettings
from delivery.providers.sendgrid.provider import SendGridProvider

IDLE_LIMIT = 0.3


class _ClosesWhenReused(http.server.BaseHTTPRequestHandler):
    """Answers as SendGrid does (202) the first request of a connection, then closes it unanswered."""

    protocol_version = "HTTP/1.1"
    accepted: list[str] = []
    connections = 0

    def setup(self) -> None:
        super().setup()
        type(self).connections += 1
        self.answered = False

    def do_POST(self) -> None:
        if self.answered:  # the server's idle timeout, met just as the request arrives
            self.close_connection = True
            return
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.accepted.append(body.decode())
        self.answered = True
        self.send_response(202)
        self.send_header("X-Message-Id", f"m{len(self.accepted)}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def esp() -> Iterator[str]:
    _ClosesWhenReused.accepted, _ClosesWhenReused.connections = [], 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ClosesWhenReused)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _send(provider: SendGridProvider, message_id: int) -> Outcome:
    email = OutgoingEmail(message_id, f"u{message_id}@example.com", "from@example.com", "Hi", "t", "<p>t</p>")
    (result,) = provider.send_batch([email])
    return result.outcome


def test_a_connection_idle_past_the_limit_is_reopened_and_the_send_is_accepted(esp):
    provider = SendGridProvider(HttpSettings(api_key="k", base_url=esp, idle_reconnect_seconds=IDLE_LIMIT))
    assert _send(provider, 1) is Outcome.ACCEPTED
    time.sleep(IDLE_LIMIT + 0.2)
    assert _send(provider, 2) is Outcome.ACCEPTED
    assert _ClosesWhenReused.connections == 2
    assert ['"2"' in body for body in _ClosesWhenReused.accepted] == [False, True]


def test_within_the_limit_the_connection_is_reused(esp):
    """The other side of the limit, and the hazard it avoids: the reused connection meets the
    stand-in's close, and that send has no answer."""
    provider = SendGridProvider(HttpSettings(api_key="k", base_url=esp, idle_reconnect_seconds=60))
    assert _send(provider, 1) is Outcome.ACCEPTED
    time.sleep(IDLE_LIMIT + 0.2)
    assert _send(provider, 2) is Outcome.AMBIGUOUS
    assert _ClosesWhenReused.connections == 1
