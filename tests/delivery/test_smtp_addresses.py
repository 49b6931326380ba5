"""Addresses on the SMTP wire (issue 12): IDNA domains, SMTPUTF8, display names, line lengths.

Real aiosmtpd servers on 127.0.0.1: a strict ASCII one (no SMTPUTF8), one offering SMTPUTF8 and
one offering PIPELINING. Every batch counts lost and duplicate messages by our id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from email import policy
from email.parser import Parser

import pytest
from aiosmtpd.controller import Controller

from delivery.models import EmailMessage
from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.smtp import SmtpProvider, SmtpSettings
from delivery.services.sending import message_batch_send
from testkit.smtp import RecordingSmtpServer
from tests.delivery.test_smtp_pipelining import PipeliningHandler
from tests.factories import email_message, template_version

IDN = "user@bücher.example"
IDN_ON_WIRE = "user@xn--bcher-kva.example"
NON_ASCII_LOCAL = "jürgen@bücher.example"


def _email(message_id: int, recipient: str = "a@example.com", **kw) -> OutgoingEmail:
    return OutgoingEmail(message_id, recipient, kw.pop("sender", "Sender <sender@example.com>"),
                         kw.pop("subject", "Subject"), "text", "<p>html</p>", kw.pop("headers", {}))


def _server(kind: str) -> RecordingSmtpServer:
    server = RecordingSmtpServer(smtputf8=kind == "smtputf8")
    if kind == "pipelining":
        server.handler = PipeliningHandler()
        server.controller = Controller(server.handler, hostname="127.0.0.1", port=server.port,
                                       enable_SMTPUTF8=False)
    server.kind = kind
    return server.start()


@pytest.fixture(params=["ascii", "pipelining", "smtputf8"])
def server(request) -> Iterator[RecordingSmtpServer]:
    server = _server(request.param)
    yield server
    server.stop()


@pytest.fixture
def provider(server) -> Iterator[SmtpProvider]:
    provider = SmtpProvider(SmtpSettings(host="127.0.0.1", port=server.port, timeout_seconds=2))
    yield provider
    provider.close()


def _parsed(raw: bytes):
    # Parser on text, not BytesParser: the latter reads a UTF-8 header (SMTPUTF8) as surrogates.
    return Parser(policy=policy.default).parsestr(raw.decode("utf-8"))


def _lost_and_duplicates(server: RecordingSmtpServer, expected: list[int]) -> tuple[list[int], list[str]]:
    ids = server.handler.ids()
    return [m for m in expected if str(m) not in ids], [i for i in set(ids) if ids.count(i) > 1]


def test_idna_domain_arrives_as_punycode_in_rcpt_and_header(provider, server):
    results = provider.send_batch([_email(1), _email(2, IDN), _email(3)])
    assert [r.outcome for r in results] == [Outcome.ACCEPTED] * 3
    assert _lost_and_duplicates(server, [1, 2, 3]) == ([], [])
    mail_from, rcpt_tos, _ = server.handler.envelopes[1]
    assert (mail_from, rcpt_tos) == ("sender@example.com", [IDN_ON_WIRE])
    assert _parsed(server.handler.raw[1])["To"].addresses[0].addr_spec == IDN_ON_WIRE


def test_failing_message_fails_alone_and_the_connection_stays_usable(provider, server):
    utf8 = server.kind == "smtputf8"
    # 2 needs SMTPUTF8; 3's domain has no IDNA form (a symbol is not a valid label character).
    batch = [_email(1), _email(2, NON_ASCII_LOCAL), _email(3, "bad@☃.example"), _email(4)]
    results = provider.send_batch(batch)
    connection = provider._connection
    expected_2 = Outcome.ACCEPTED if utf8 else Outcome.PERMANENT
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, expected_2, Outcome.PERMANENT, Outcome.ACCEPTED]
    # The next batch goes over the same kept-alive connection (no "503 nested MAIL command").
    assert provider.send_batch([_email(5)])[0].outcome is Outcome.ACCEPTED
    assert provider._connection is connection
    sent = [1, 2, 4, 5] if utf8 else [1, 4, 5]
    assert _lost_and_duplicates(server, sent) == ([], [])
    assert sorted(server.handler.ids(), key=int) == [str(m) for m in sent]


def test_a_bug_in_one_message_leaves_its_batch_mates_alone(provider, server):
    # A header value of the wrong type stands for any bug while one message is prepared: before
    # the fix it escaped send_batch and the failover held the whole batch as AMBIGUOUS.
    broken = _email(2, headers={"X-Tag": None})
    results = provider.send_batch([_email(1), broken, _email(3)])
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.TRANSIENT, Outcome.ACCEPTED]
    assert "AttributeError" in results[1].error
    assert _lost_and_duplicates(server, [1, 3]) == ([], [])


def test_from_display_name_parses_back_to_name_and_address(provider, server):
    sender = '"Jürgen Groß, Ünïcode & Co." <news@bücher.example>'
    results = provider.send_batch([_email(1, sender=sender)])
    assert results[0].outcome is Outcome.ACCEPTED
    received = _parsed(server.handler.raw[0])
    address = received["From"].addresses[0]
    assert address.display_name == "Jürgen Groß, Ünïcode & Co."
    assert address.addr_spec == "news@xn--bcher-kva.example"
    assert server.handler.envelopes[0][0] == "news@xn--bcher-kva.example"
    assert received["Message-ID"].endswith("@xn--bcher-kva.example>")


def test_no_header_line_is_longer_than_998_octets(provider, server):
    # SafeLineField lets through 998 characters: with the header name the line was longer, and a
    # value without spaces was never folded (aiosmtpd refuses such a line: "500 Line too long").
    long_subject, long_tag = "S" * 998, "t" * 998
    results = provider.send_batch([_email(1, subject=long_subject, headers={"X-Tag": long_tag})])
    assert [(r.outcome, r.error) for r in results] == [(Outcome.ACCEPTED, "")]
    raw = server.handler.raw[0]
    head = raw.split(b"\r\n\r\n", 1)[0]
    assert max(len(line) for line in head.split(b"\r\n")) <= 998
    received = _parsed(raw)
    assert (received["Subject"], received["X-Tag"]) == (long_subject, long_tag)


@pytest.mark.parametrize("server", ["smtputf8"], indirect=True)
def test_non_ascii_local_part_travels_with_smtputf8_when_offered(provider, server):
    results = provider.send_batch([_email(1, NON_ASCII_LOCAL)])
    assert results[0].outcome is Outcome.ACCEPTED
    _, rcpt_tos, options = server.handler.envelopes[0]
    assert rcpt_tos == ["jürgen@xn--bcher-kva.example"] and "SMTPUTF8" in options
    assert _parsed(server.handler.raw[0])["To"].addresses[0].addr_spec == "jürgen@xn--bcher-kva.example"


@pytest.mark.parametrize("server", ["ascii", "pipelining"], indirect=True)
def test_non_ascii_local_part_without_smtputf8_is_permanent_for_that_message(provider, server):
    results = provider.send_batch([_email(1, NON_ASCII_LOCAL)])
    assert (results[0].outcome, server.handler.ids()) == (Outcome.PERMANENT, [])
    assert "SMTPUTF8" in results[0].error


@pytest.mark.django_db
@pytest.mark.parametrize("server", ["ascii"], indirect=True)
def test_through_the_sending_service_one_bad_address_is_one_failed_message(settings, server):
    """Before: the UnicodeEncodeError escaped the provider and the failover held the whole batch
    AMBIGUOUS (the accepted message and the never-sent ones too), leaving the kept-alive
    connection mid-transaction for the next batch ("503 nested MAIL command")."""
    settings.NOTIFIER_PROVIDERS = ["smtp"]
    settings.SMTP_HOST, settings.SMTP_PORT, settings.SMTP_TIMEOUT_SECONDS = "127.0.0.1", server.port, 2
    settings.NOTIFIER_FROM_EMAIL = '"Jürgen Groß" <news@bücher.example>'
    version = template_version()
    recipients = ["a@example.com", NON_ASCII_LOCAL, IDN, "c@example.com"]
    messages = [email_message(version=version, recipient=r, priority=2) for r in recipients]
    report = message_batch_send(message_ids=[m.id for m in messages], token=uuid.uuid4().hex)
    statuses = [EmailMessage.objects.get(pk=m.pk).status for m in messages]
    assert statuses == ["SENT", "FAILED", "SENT", "SENT"]
    assert (report.sent, report.failed, report.ambiguous) == (3, 1, 0)
    later = email_message(version=version, priority=2)
    assert message_batch_send(message_ids=[later.id], token=uuid.uuid4().hex).sent == 1
    sent = [messages[0].id, messages[2].id, messages[3].id, later.id]
    assert _lost_and_duplicates(server, sent) == ([], [])
    assert sorted(server.handler.ids(), key=int) == [str(m) for m in sent]
