"""The SMTP provider against a real SMTP server on 127.0.0.1."""

import pytest

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.smtp import SmtpProvider, SmtpSettings
from tests.support.ports import free_port


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
