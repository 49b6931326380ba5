"""A recording SMTP server on 127.0.0.1 for tests (stands in for the outside world)."""

from __future__ import annotations

import asyncio
import email
import threading
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller

from tests.support.ports import free_port


@dataclass
class RecordingHandler:
    messages: list[email.message.Message] = field(default_factory=list)
    hang_seconds: float = 0.0
    reject_recipients: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server, session, envelope, address, options):
        if address.lower() in self.reject_recipients:
            return "550 5.1.1 No such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.hang_seconds:
            await asyncio.sleep(self.hang_seconds)
        with self.lock:
            self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted"

    def ids(self) -> list[str]:
        with self.lock:
            return [m["X-Notifier-Message-Id"] for m in self.messages]


class RecordingSmtpServer:
    def __init__(self) -> None:
        self.handler = RecordingHandler()
        self.port = free_port()
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)

    def start(self) -> RecordingSmtpServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
