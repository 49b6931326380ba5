"""aiosmtpd-based SMTP sink that records into the Ledger and honours the FaultPlan.

Why: the SMTP provider path (and Django's SMTP backend) must be exercised against a
real SMTP conversation, including per-recipient 550s and transient 4xx replies.
Reply codes follow RFC 5321 section 4.2 (https://www.rfc-editor.org/rfc/rfc5321).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, Session

from tests.fakes.context import StartStopContext
from tests.fakes.faults import OK_FAULT, Fault, FaultPlan, Mode
from tests.fakes.ledger import Ledger, Outcome
from tests.fakes.supervisor import RefusalSupervisor

HOST = "127.0.0.1"
MESSAGE_ID_HEADER = "X-Notifier-Message-Id"
IDLE_TIMEOUT_SECONDS = 30  # aiosmtpd closes idle sessions after this
MAX_MESSAGE_BYTES = 40 * 1024 * 1024


class SmtpSink(StartStopContext):
    """SMTP server on 127.0.0.1 (ephemeral port unless ``port`` given).

    AUTH PLAIN/LOGIN is advertised without TLS and any credentials are accepted, so
    clients configured with a username still work. ``eml_dir`` keeps a copy of every
    accepted message.
    """

    provider = "smtp"

    def __init__(
        self,
        *,
        ledger: Ledger | None = None,
        faults: FaultPlan | None = None,
        name: str | None = None,
        port: int = 0,
        eml_dir: str | Path | None = None,
    ) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.faults = faults if faults is not None else FaultPlan()
        self.name = name or self.provider
        self.eml_dir = Path(eml_dir) if eml_dir is not None else None
        self.host = HOST
        self._port = port
        self._controller: _Controller | None = None
        self._supervisor: RefusalSupervisor | None = None
        self._handler = _SinkHandler(self)
        self._seq = itertools.count(1)
        self._seq_lock = threading.Lock()

    @property
    def port(self) -> int:
        """The bound port (stable across refuse/reopen)."""
        return self._port

    def _before_start(self) -> None:
        if self.eml_dir is not None:
            self.eml_dir.mkdir(parents=True, exist_ok=True)

    def _open_listener(self) -> None:
        controller = _Controller(
            self._handler, hostname=HOST, port=self._port, server_hostname="fake-smtp.local",
            ready_timeout=5, timeout=IDLE_TIMEOUT_SECONDS, data_size_limit=MAX_MESSAGE_BYTES,
            authenticator=_accept_any, auth_require_tls=False,
        )
        controller.start()
        self._port = controller.port
        self._controller = controller

    def _close_listener(self) -> None:
        controller, self._controller = self._controller, None
        if controller is not None:
            controller.stop()

    def next_queue_id(self) -> str:
        """Provider message id for the next accepted message."""
        with self._seq_lock:
            seq = next(self._seq)
        return f"{seq:06d}.{uuid.uuid4().hex[:12]}"

    def save_eml(self, queue_id: str, content: bytes) -> None:
        """Write ``<queue_id>.eml`` into ``eml_dir`` when configured."""
        if self.eml_dir is not None:
            (self.eml_dir / f"{queue_id}.eml").write_bytes(content)


class _Controller(Controller):
    """Controller that supports ``port=0``: aiosmtpd's self-test connects to ``self.port``."""

    def _trigger_server(self) -> None:
        if self.port == 0 and self.server is not None:
            self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


def _accept_any(*_: Any) -> AuthResult:
    return AuthResult(success=True)


class _SinkHandler:
    """aiosmtpd handler hooks; one fault decision per transaction, at ``MAIL FROM``."""

    def __init__(self, sink: SmtpSink) -> None:
        self.sink = sink

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str,
        mail_options: list[str],
    ) -> str:
        faults, ledger = self.sink.faults, self.sink.ledger
        if faults.is_refusing():
            ledger.count_request(Outcome.DROPPED)
            return _closing(server, "421 4.3.2 Service not available, closing channel")
        fault = faults.decide()
        if fault.mode is Mode.ERROR_5XX:
            ledger.count_request(Outcome.SERVER_ERROR)
            reply = f"{fault.smtp_code} 4.3.0 Temporary local problem, try again later"
            return _closing(server, reply) if fault.smtp_code == 421 else reply
        if fault.mode is Mode.RATE_LIMIT_429:
            ledger.count_request(Outcome.RATE_LIMITED)
            return _closing(server, f"421 4.7.0 Too many messages, retry after "
                                    f"{fault.retry_after} seconds")
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        envelope.notifier_fault = fault  # type: ignore[attr-defined]
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str,
        rcpt_options: list[str],
    ) -> str:
        if self.sink.faults.is_rejected(address):
            self.sink.ledger.count_request(Outcome.REJECTED)
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 2.1.5 OK"

    async def handle_DATA(
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        fault: Fault = getattr(envelope, "notifier_fault", OK_FAULT)
        if fault.latency > 0:
            await asyncio.sleep(fault.latency)
        content = envelope.original_content or envelope.content or b""
        if isinstance(content, str):
            content = content.encode("utf-8")
        queue_id = self.sink.next_queue_id()
        message_id = BytesHeaderParser().parsebytes(content).get(MESSAGE_ID_HEADER)
        for rcpt in envelope.rcpt_tos:
            self.sink.ledger.record(self.sink.name, message_id, rcpt, queue_id)
        self.sink.save_eml(queue_id, content)
        if fault.mode is Mode.ACCEPT_THEN_HANG:
            self.sink.ledger.count_request(Outcome.HUNG)
            await asyncio.sleep(fault.hang_seconds)
            if server.transport is not None:
                server.transport.abort()  # close without the final DATA reply
            return "421 4.4.2 Timeout"  # never reaches the client: transport is gone
        self.sink.ledger.count_request(Outcome.ACCEPTED)
        return f"250 2.0.0 Ok: queued as {queue_id}"


def _closing(server: SMTP, reply: str) -> str:
    """Send ``reply`` then close the session, as RFC 5321 requires after a 421."""
    if server.transport is not None:
        asyncio.get_running_loop().call_soon(server.transport.close)
    return reply
