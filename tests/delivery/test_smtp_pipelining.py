"""The SMTP provider's PIPELINING path (RFC 2920) against real SMTP servers on 127.0.0.1.

aiosmtpd reads pipelined commands in order but does not advertise PIPELINING, so the recording
server here adds it to its EHLO answer; one test also runs against Postfix's smtp-sink.
"""

import email
import os
import shutil
import socket
import subprocess
import time

import pytest
from aiosmtpd.controller import Controller

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.smtp import SmtpProvider, SmtpSettings, _data_bytes, envelope_for
from testkit.ports import free_port
from testkit.smtp import (
    RecordingHandler,
    RecordingSmtpServer,
    assert_arrived_byte_exact,
    campaign_email,
)


class PipeliningHandler(RecordingHandler):
    async def handle_EHLO(self, server, session, envelope, hostname, responses):  # noqa: N802 (aiosmtpd hook)
        session.host_name = hostname
        return [*responses[:-1], "250-PIPELINING", responses[-1]]


@pytest.fixture
def pipelining_server():
    server = RecordingSmtpServer()
    server.handler = PipeliningHandler()
    server.controller = Controller(server.handler, hostname="127.0.0.1", port=server.port)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def provider(pipelining_server):
    provider = SmtpProvider(SmtpSettings(host="127.0.0.1", port=pipelining_server.port, timeout_seconds=1))
    yield provider
    provider.close()


def _email(message_id: int, recipient: str = "a@example.com", subject: str = "Subject") -> OutgoingEmail:
    headers = {"List-Unsubscribe": "<https://example.com/u/" + "x" * 200 + ">"}
    sender = "Sender <sender@example.com>"
    return OutgoingEmail(message_id, recipient, sender, subject, "tëxt\n.dot", "<p>é</p>", headers)


def test_pipelined_batch_is_accepted_and_parses(provider, pipelining_server):
    results = provider.send_batch([_email(1, subject="Héllo ✓"), _email(2), _email(3)])
    assert provider._connection.has_extn("pipelining")
    assert [r.outcome for r in results] == [Outcome.ACCEPTED] * 3
    assert pipelining_server.handler.ids() == ["1", "2", "3"]
    first = pipelining_server.handler.messages[0]
    subject = str(email.header.make_header(email.header.decode_header(first["Subject"])))
    assert subject == "Héllo ✓"
    assert first["Message-ID"].strip("<>") == results[0].provider_message_id
    text, html = first.get_payload()
    assert text.get_payload(decode=True).decode() == "tëxt\n.dot"
    assert html.get_payload(decode=True).decode() == "<p>é</p>"
    assert first["List-Unsubscribe"].endswith("x" * 200 + ">")


def test_pipelined_rejected_recipient_is_permanent_and_the_next_one_goes(provider, pipelining_server):
    pipelining_server.handler.reject_recipients = {"gone@example.com"}
    results = provider.send_batch([_email(1, "gone@example.com"), _email(2), _email(3, "gone@example.com"),
                                   _email(4)])
    assert [r.outcome for r in results] == [Outcome.PERMANENT, Outcome.ACCEPTED] * 2
    assert results[0].response_code == "550"
    assert pipelining_server.handler.ids() == ["2", "4"]


def test_pipelined_no_answer_to_the_body_is_ambiguous(provider, pipelining_server):
    pipelining_server.handler.hang_seconds = 3
    results = provider.send_batch([_email(1), _email(2)])
    assert [r.outcome for r in results] == [Outcome.AMBIGUOUS, Outcome.TRANSIENT]


def test_pipelined_large_campaign_message_arrives_byte_exact(provider, pipelining_server):
    sent = [campaign_email(7), campaign_email(8, "other@example.com")]
    results = provider.send_batch(sent)
    assert provider._connection.has_extn("pipelining")
    assert [(r.outcome, r.response_code, r.error) for r in results] == [(Outcome.ACCEPTED, "250", "")] * 2
    assert_arrived_byte_exact(pipelining_server.handler, sent[-1])


def test_pipelined_lines_starting_with_a_dot_are_stuffed_on_the_wire(provider, pipelining_server):
    payload = b"Subject: dots\r\nX-Notifier-Message-Id: 9\r\n\r\n.\r\n..\r\n.leading\r\nend\r\n"
    outcome = provider._transaction(provider._connect(), envelope_for(_email(9), server_utf8=False), payload)
    assert outcome == (Outcome.ACCEPTED, "250", "")
    assert pipelining_server.handler.raw == [payload]


def test_data_bytes_uses_crlf_and_stuffs_leading_dots():
    assert _data_bytes(b"a\n.b\r\n..c\nd") == b"a\r\n..b\r\n...c\r\nd\r\n.\r\n"


def test_postfix_smtp_sink_takes_a_pipelined_batch():
    sink = shutil.which("smtp-sink") or "/usr/sbin/smtp-sink"
    if not os.path.exists(sink):
        pytest.fail("Postfix smtp-sink is not installed: sudo devtools/test_packages.sh")
    port = free_port()
    # `timeout` bounds the sink's life whatever happens to this test.
    process = subprocess.Popen(["timeout", "60", sink, "-u", "nobody", f"127.0.0.1:{port}", "10"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        provider = SmtpProvider(SmtpSettings(host="127.0.0.1", port=port, timeout_seconds=5))
        results = provider.send_batch([_email(i) for i in range(1, 21)])
        assert provider._connection.has_extn("pipelining")
        provider.close()
        assert [r.outcome for r in results] == [Outcome.ACCEPTED] * 20
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_pipelined_next_commands_ride_behind_the_body_one_write_a_message(provider, pipelining_server):
    """RFC 2920 3.1 lets message content open a group: the body's write also carries the next
    message's MAIL, RCPT and DATA, so a batch of n costs n + 1 writes instead of 2n."""
    provider._connect()
    writes = []
    send = provider._connection.send
    provider._connection.send = lambda data: (writes.append(data), send(data))[1]
    pipelining_server.handler.reject_recipients = {"gone@example.com"}
    results = provider.send_batch([_email(1), _email(2, "gone@example.com"), _email(3), _email(4)])
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.PERMANENT, Outcome.ACCEPTED,
                                            Outcome.ACCEPTED]
    assert pipelining_server.handler.ids() == ["1", "3", "4"]
    writes = [w for w in writes if isinstance(w, bytes)]  # smtplib's own commands (RSET) are str
    bodies_with_next = [w for w in writes if w.endswith(b"DATA\r\n") and b"\r\n.\r\nMAIL FROM:" in w]
    assert len(bodies_with_next) == 2  # 1's body + 2's commands; 3's body + 4's commands
    assert len([w for w in writes if b"\r\n.\r\n" in w]) == 3
