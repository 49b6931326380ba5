"""Addresses and request sizes on the HTTP ESPs' wire (issue 12), against the fake ESPs.

The fakes refuse a body over the ESP's documented limit with a 413, as the real ones do, and
record every request's size. Every test counts lost and duplicate messages by our id.
"""

from __future__ import annotations

import http.server
import json
import threading
from email.headerregistry import HeaderRegistry

import pytest

from delivery.providers import get_provider
from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.http import HttpSettings
from delivery.providers.mailgun.provider import MailgunProvider
from delivery.providers.sendgrid.provider import SendGridProvider
from delivery.providers.ses.provider import SesProvider, SesSettings
from testkit.fakes.mailgun import parse_form

SENDER = '"Jürgen Groß, Ünïcode & Co." <news@bücher.example>'
RECIPIENTS = ["a@example.com", "user@bücher.example", "jürgen@example.com"]
SENDER_PARSED = ("Jürgen Groß, Ünïcode & Co.", "news@xn--bcher-kva.example")
ON_THE_WIRE = ["a@example.com", "user@xn--bcher-kva.example"]


def _email(message_id: int, recipient: str, *, sender: str = SENDER, body: str = "") -> OutgoingEmail:
    text = body or f"plain {message_id}"
    return OutgoingEmail(message_id, recipient, sender, f"Hello {message_id}", text, f"<p>{text}</p>")


def _lost_and_duplicates(fake, emails: list[OutgoingEmail]) -> tuple[list[int], dict]:
    got = fake.ledger.by_message_id()
    lost = [e.message_id for e in emails if str(e.message_id) not in got]
    return lost, {k: len(v) for k, v in got.items() if len(v) > 1}


def _mixed_batch() -> list[OutgoingEmail]:
    return [_email(i + 1, recipient) for i, recipient in enumerate(RECIPIENTS)]


def _parsed_mailbox(value: str):
    return HeaderRegistry()("From", value).addresses[0]


def test_sendgrid_gets_name_and_email_and_punycode_recipients(sendgrid):
    provider = SendGridProvider(HttpSettings(api_key="test-sendgrid-key", base_url=sendgrid.url))
    batch = _mixed_batch()
    results = provider.send_batch(batch)
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.PERMANENT]
    assert "not ASCII" in results[2].error
    (request,) = sendgrid.received()
    body = request.json()
    assert body["from"] == {"email": SENDER_PARSED[1], "name": SENDER_PARSED[0]}
    assert [p["to"][0]["email"] for p in body["personalizations"]] == ON_THE_WIRE
    assert _lost_and_duplicates(sendgrid, batch[:2]) == ([], {})


def test_mailgun_from_parses_back_and_recipients_are_punycode(mailgun):
    provider = MailgunProvider(HttpSettings(api_key="test-mailgun-key", base_url=mailgun.url,
                                            domain="mg.example.org"))
    batch = _mixed_batch()
    results = provider.send_batch(batch)
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.PERMANENT]
    form = parse_form(mailgun.received()[0])
    sender = _parsed_mailbox(form["from"][0])
    assert (sender.display_name, sender.addr_spec) == SENDER_PARSED
    assert form["from"][0].isascii()
    assert form["to"] == ON_THE_WIRE
    assert list(json.loads(form["recipient-variables"][0])) == ON_THE_WIRE
    assert _lost_and_duplicates(mailgun, batch[:2]) == ([], {})


@pytest.mark.parametrize("same_content", [False, True], ids=["send_email", "bulk"])
def test_ses_gets_punycode_and_an_encoded_display_name(ses, same_content):
    provider = SesProvider(SesSettings(region="us-east-1", access_key_id="test", secret_access_key="test",
                                       endpoint_url=ses.url))
    batch = [_email(i + 1, r, body="same" if same_content else "") for i, r in enumerate(RECIPIENTS)]
    if same_content:
        batch = [OutgoingEmail(e.message_id, e.recipient, e.from_email, "Hi", e.text, e.html) for e in batch]
    try:
        results = provider.send_batch(batch)
    finally:
        provider.close()
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.PERMANENT]
    bodies = [request.json() for request in ses.received()]
    senders = {body["FromEmailAddress"] for body in bodies}
    assert len(senders) == 1 and senders.pop().isascii()
    sender = _parsed_mailbox(bodies[0]["FromEmailAddress"])
    assert (sender.display_name, sender.addr_spec) == SENDER_PARSED
    destinations = [entry["Destination"]["ToAddresses"][0] for body in bodies
                    for entry in body.get("BulkEmailEntries") or [body]]
    assert sorted(destinations) == sorted(ON_THE_WIRE)
    assert _lost_and_duplicates(ses, batch[:2]) == ([], {})


# The esps fixture answers in 1 s or calls the request AMBIGUOUS; parsing a 12 MB multipart body in
# the fake (same process, shared with the other xdist worker's load) took longer than that in CI.
# These tests are about how a batch is split, not about how fast the fake answers.
LARGE_REQUEST_READ_TIMEOUT_SECONDS = 60.0


def _large_batch(n: int = 1000) -> list[OutgoingEmail]:
    """n messages with different ~34 KB bodies (under SendGrid's substitution budget each)."""
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 290  # ~16.8 KB
    return [_email(i + 1, f"user{i}@example.com", sender="news@example.com", body=f"{i} {filler}")
            for i in range(n)]


@pytest.mark.parametrize(("name", "limit"), [("sendgrid", 30_000_000), ("mailgun", 25_000_000)])
def test_batch_is_split_under_the_documented_request_size(esps, settings, name, limit):
    settings.NOTIFIER_PROVIDERS = [name]
    settings.ESP_READ_TIMEOUT_SECONDS = LARGE_REQUEST_READ_TIMEOUT_SECONDS
    batch = _large_batch()
    assert sum(len(e.text) + len(e.html) for e in batch) > 1.3 * 25_000_000 > limit - 1
    results = get_provider(name).send_batch(batch)
    sizes = esps[name].request_sizes()
    assert [r.outcome for r in results] == [Outcome.ACCEPTED] * len(batch)
    assert len(sizes) >= 2 and max(sizes) <= limit
    assert _lost_and_duplicates(esps[name], batch) == ([], {})


@pytest.mark.parametrize("name", ["sendgrid", "mailgun"])
def test_the_size_limit_is_a_setting(esps, settings, name):
    setattr(settings, f"{name.upper()}_MAX_REQUEST_BYTES", 2_000_000)
    settings.ESP_READ_TIMEOUT_SECONDS = LARGE_REQUEST_READ_TIMEOUT_SECONDS
    batch = _large_batch(200)  # ~6.8 MB of bodies
    results = get_provider(name).send_batch(batch)
    assert [r.outcome for r in results] == [Outcome.ACCEPTED] * len(batch)
    assert len(esps[name].request_sizes()) >= 4 and max(esps[name].request_sizes()) <= 2_000_000
    assert _lost_and_duplicates(esps[name], batch) == ([], {})



class _RecordingProxy(http.server.BaseHTTPRequestHandler):
    """A forward proxy stand-in: records the absolute URI it was asked for and answers as
    SendGrid does (202, X-Message-Id)."""

    seen: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(self.path)
        self.send_response(202)
        self.send_header("X-Message-Id", "via-proxy")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecordingProxy)
    _RecordingProxy.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _RecordingProxy.seen
    server.shutdown()
    server.server_close()


def test_an_esp_is_reached_through_the_proxy_the_environment_names(monkeypatch, proxy):
    url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    provider = SendGridProvider(HttpSettings(api_key="k", base_url="http://esp.invalid"))
    (result,) = provider.send_batch([_email(1, "a@example.com")])
    assert result.outcome is Outcome.ACCEPTED
    assert seen == ["http://esp.invalid/v3/mail/send"]


def test_no_proxy_is_honoured_and_the_environment_is_read_once(monkeypatch, sendgrid):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    provider = SendGridProvider(HttpSettings(api_key="test-sendgrid-key", base_url=sendgrid.url))
    monkeypatch.delenv("NO_PROXY")  # read at construction: this session still goes direct
    emails = [_email(1, "a@example.com")]
    assert [r.outcome for r in provider.send_batch(emails)] == [Outcome.ACCEPTED]
    assert _lost_and_duplicates(sendgrid, emails) == ([], {})
