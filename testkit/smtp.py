"""A recording SMTP server on 127.0.0.1 for tests (stands in for the outside world)."""

from __future__ import annotations

import asyncio
import email
import threading
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller

from delivery.providers.base import OutgoingEmail
from delivery.providers.mime import build_mime
from testkit.ports import free_port


@dataclass
class RecordingHandler:
    messages: list[email.message.Message] = field(default_factory=list)
    # What arrived byte for byte, after the server's own un-stuffing (RFC 5321 4.5.2).
    raw: list[bytes] = field(default_factory=list)
    # (MAIL FROM, RCPT TOs, MAIL parameters) of each accepted message, as the wire carried them.
    envelopes: list[tuple[str, list[str], list[str]]] = field(default_factory=list)
    hang_seconds: float = 0.0
    # Hang only once this many messages were accepted (None: every message hangs).
    hang_from: int | None = None
    # Bodies received whose reply is being held (a test kills the client while one is).
    bodies_held: int = 0
    reject_recipients: set[str] = field(default_factory=set)
    # Refusals as a broken relay or a list of bad addresses gives them: one reply for every RCPT
    # or every DATA (e.g. "550 5.7.1 Relay access denied"), or a reply per recipient.
    refuse_every_rcpt: str = ""
    refuse_every_data: str = ""
    rcpt_replies: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server, session, envelope, address, options):
        if address.lower() in self.reject_recipients:
            return "550 5.1.1 No such user"
        refusal = self.rcpt_replies.get(address.lower()) or self.refuse_every_rcpt
        if refusal:
            return refusal
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.refuse_every_data:
            return self.refuse_every_data
        if self.hang_seconds and (self.hang_from is None or len(self.messages) >= self.hang_from):
            self.bodies_held += 1
            await asyncio.sleep(self.hang_seconds)
        with self.lock:
            self.messages.append(email.message_from_bytes(envelope.content))
            self.raw.append(envelope.original_content)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos), list(envelope.mail_options)))
        return "250 Message accepted"

    def ids(self) -> list[str]:
        with self.lock:
            return [m["X-Notifier-Message-Id"] for m in self.messages]


class RecordingSmtpServer:
    def __init__(self, *, smtputf8: bool = False) -> None:
        self.handler = RecordingHandler()
        self.port = free_port()
        # aiosmtpd offers SMTPUTF8 (RFC 6531) only when asked; without it a non-ASCII MAIL or RCPT
        # argument is refused, as a strict ASCII server does.
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port,
                                     enable_SMTPUTF8=smtputf8)

    def start(self) -> RecordingSmtpServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()


def campaign_email(message_id: int, recipient: str = "reader@example.com") -> OutgoingEmail:
    """A ~50 KB campaign-style message: a 20 KB HTML line, lines starting with '.', non-ASCII."""
    row = ('<tr><td style="padding:0 24px;font-family:Helvetica,Arial,sans-serif;font-size:15px;'
           'line-height:22px;color:#333">Grüße, naïve café, 日本語のニュース ✓ 🎉</td></tr>')
    html = ("<html><body><table>" + row * 130 + "</table>\n.hidden {display:none}\n"
            "..two dots\n.\n</body></html>\n")
    text = "\n".join([".starts with a dot", ".", "..", "Grüße aus Köln — 日本語"] * 220)
    url = "https://notifier.example.com/u/" + "A1b2C3d4" * 30
    headers = {"List-Unsubscribe": f"<{url}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
    subject = "Die Neuigkeiten der Woche: Grüße ✓ " + "lange Betreffzeile " * 6
    return OutgoingEmail(message_id, recipient, "News <news@example.com>", subject, text, html, headers)


def assert_arrived_byte_exact(handler: RecordingHandler, sent: OutgoingEmail) -> None:
    """The last message the server received (after its un-stuffing) is the provider's build_mime
    output for `sent`, byte for byte (rebuilt with the random boundary and date it carries)."""
    raw, received = handler.raw[-1], handler.messages[-1]
    assert b"\n" not in raw.replace(b"\r\n", b""), "a bare LF reached the server"
    assert max(len(line) for line in raw.split(b"\r\n")) <= 998  # RFC 5322 2.1.1
    built = build_mime(sent, received["Message-ID"], boundary=received.get_boundary(), date=received["Date"])
    assert raw == built
    text, html = received.get_payload()
    assert text.get_payload(decode=True).decode() == sent.text
    assert html.get_payload(decode=True).decode() == sent.html
