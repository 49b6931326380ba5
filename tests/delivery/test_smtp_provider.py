"""The SMTP provider against a real SMTP server on 127.0.0.1."""

import pytest

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.smtp import SmtpProvider, SmtpSettings, envelope_for
from testkit.ports import free_port
from testkit.smtp import assert_arrived_byte_exact, campaign_email


def _email(message_id: int, recipient: str = "a@example.com") -> OutgoingEmail:
    return OutgoingEmail(message_id, recipient, "sender@example.com", "Subject", "text", "<p>html</p>")


@pytest.fixture
def provider(smtp_server):
    provider = SmtpProvider(SmtpSettings(host="127.0.0.1", port=smtp_server.port, timeout_seconds=1))
    yield provider
    provider.close()


def test_batch_is_accepted_over_one_reused_connection(provider, smtp_server):
    results = provider.send_batch([_email(1), _email(2)])
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.ACCEPTED]
    assert smtp_server.handler.ids() == ["1", "2"]
    first_connection = provider._connection
    provider.send_batch([_email(3)])
    assert provider._connection is first_connection
    received = smtp_server.handler.messages[0]
    assert received["Message-ID"].strip("<>") == results[0].provider_message_id
    assert received.is_multipart()


def test_rejected_recipient_is_permanent_and_does_not_stop_the_batch(provider, smtp_server):
    smtp_server.handler.reject_recipients = {"gone@example.com"}
    results = provider.send_batch([_email(1, "gone@example.com"), _email(2)])
    assert [r.outcome for r in results] == [Outcome.PERMANENT, Outcome.ACCEPTED]
    assert results[0].response_code == "550"


def test_refused_connection_is_transient():
    provider = SmtpProvider(SmtpSettings(host="127.0.0.1", port=free_port(), timeout_seconds=1))
    results = provider.send_batch([_email(1), _email(2)])
    assert {r.outcome for r in results} == {Outcome.TRANSIENT}


def test_no_answer_to_data_is_ambiguous_and_the_rest_is_not_sent(provider, smtp_server):
    smtp_server.handler.hang_seconds = 3
    results = provider.send_batch([_email(1), _email(2)])
    assert [r.outcome for r in results] == [Outcome.AMBIGUOUS, Outcome.TRANSIENT]


def test_large_campaign_message_arrives_byte_exact_without_pipelining(provider, smtp_server):
    # aiosmtpd offers no PIPELINING and reads lines up to CRLF, refusing one over 1001 octets:
    # a body with bare LFs over ~1 KB was refused as "500 Line too long".
    sent = [campaign_email(7), campaign_email(8, "other@example.com")]
    results = provider.send_batch(sent)
    assert not provider._connection.has_extn("pipelining")
    assert [(r.outcome, r.response_code, r.error) for r in results] == [(Outcome.ACCEPTED, "250", "")] * 2
    assert len(smtp_server.handler.raw[-1]) > 45_000
    assert smtp_server.handler.messages[-1]["Message-ID"].strip("<>") == results[-1].provider_message_id
    assert_arrived_byte_exact(smtp_server.handler, sent[-1])


def test_lines_starting_with_a_dot_are_stuffed_on_the_wire(provider, smtp_server):
    # build_mime's base64 never starts a line with '.', so a hand-written body checks the stuffing
    # (a lone '.' line would otherwise end DATA early).
    payload = b"Subject: dots\r\nX-Notifier-Message-Id: 9\r\n\r\n.\r\n..\r\n.leading\r\nend\r\n"
    outcome = provider._transaction(provider._connect(), envelope_for(_email(9), server_utf8=False), payload)
    assert outcome == (Outcome.ACCEPTED, "250", "")
    assert smtp_server.handler.raw == [payload]
