"""SMTP provider: one reused connection per worker process, STARTTLS and auth when configured.

The transaction is driven step by step (MAIL, RCPT, DATA) instead of `sendmail()` so each
failure can be classified: anything before DATA completes its reply is either a clear 4xx/5xx
or a connection problem before acceptance (TRANSIENT); a dropped or timed-out connection while
the body is in flight or its reply is awaited is AMBIGUOUS (RFC 5321 section 4.5.4.1 lets the
server have accepted it).

When the server advertises PIPELINING (RFC 2920), MAIL, RCPT and DATA go out in one write and
their three replies are read afterwards; the body and its final dot are the second write, and
it also carries the next message's MAIL, RCPT and DATA ("the actual transfer of message content
is explicitly allowed to be the first command in a group", 3.1): one write and one round trip
per message instead of four, with the same classification: a refusal of MAIL or RCPT is that
message's 4xx/5xx (the transaction is reset before the next one), a lost connection before the
body is sent is TRANSIENT, no reply to the final dot is AMBIGUOUS (and the next message, whose
commands rode behind that body, TRANSIENT: no body of it was sent). Every message is encoded
(addresses, MIME) before the batch's first command, so the one whose commands ride ahead is
known to be sendable; after an unexpected error with commands in flight the connection is
dropped rather than RSET (an RSET could land as body text).

Both paths write the body the same way (`_body`): CRLF line ends, dot-stuffed (RFC 5321 2.3.8,
4.5.2). smtplib's `data()` is not used: it sends a bytes body as is, bare LFs included.

Addresses (addresses.py): domains travel IDNA-encoded in MAIL, RCPT and the headers; a
non-ASCII local part goes out with `MAIL FROM:<..> SMTPUTF8` (RFC 6531) when the server offers
SMTPUTF8 and is that one message's PERMANENT failure when it does not. Whatever goes wrong with
one message, the next one starts on a clean connection: after any exception before the body the
transaction is RSET (or the connection dropped when RSET fails too), so a kept-alive connection
is never left mid-transaction ("503 nested MAIL command" for the next message on it).
"""

from __future__ import annotations

import logging
import re
import smtplib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings as django_settings

from core.addresses import AddressError
from core.list_headers import HeaderError
from delivery.providers.addresses import mailbox
from delivery.providers.base import (
    Esp,
    Journal,
    Outcome,
    OutgoingEmail,
    Provider,
    SendResult,
    TransientError,
    results_for_error,
)
from delivery.providers.mime import build_mime, new_message_id_header

logger = logging.getLogger(__name__)
_CONNECTION_ERRORS = (OSError, smtplib.SMTPServerDisconnected, smtplib.SMTPConnectError)
_LEADING_DOT = re.compile(rb"(?m)^\.")


def _data_bytes(payload: bytes) -> bytes:
    """CRLF line ends (RFC 5321 2.3.8), dot-stuffed (4.5.2), terminated by CRLF.CRLF.

    build_mime already writes CRLF; a stray bare LF is still turned into CRLF here, so no path
    can put one on the wire."""
    data = _LEADING_DOT.sub(b"..", payload.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data + b".\r\n"


@dataclass(frozen=True)
class Envelope:
    """MAIL FROM and RCPT TO as the wire takes them; `utf8` adds the SMTPUTF8 parameter."""

    sender: str
    recipient: str
    utf8: bool

    @property
    def mail_options(self) -> tuple[str, ...]:
        return ("SMTPUTF8",) if self.utf8 else ()


def envelope_for(email: OutgoingEmail, *, server_utf8: bool) -> Envelope:
    """AddressError when an address cannot travel to this server (permanent for the message)."""
    sender = mailbox(email.from_email, utf8=server_utf8)
    recipient = mailbox(email.recipient, utf8=server_utf8)
    return Envelope(sender.addr_spec, recipient.addr_spec, sender.needs_utf8 or recipient.needs_utf8)


@dataclass(frozen=True)
class _Plan:
    """One message ready for the wire: its Message-ID, envelope and MIME bytes, or why not."""

    header_id: str
    envelope: Envelope | None
    payload: bytes
    error: str = ""
    outcome: Outcome = Outcome.PERMANENT  # when there is no envelope


@dataclass
class _Step:
    """Pipelining state of one message: its commands sent ahead; the next one's to send behind
    its body, and whether they were."""

    ahead: bool = False
    follow: bytes = b""
    followed: bool = False


def _commands(envelope: Envelope) -> bytes:
    """MAIL, RCPT and DATA of one transaction, as one pipelined group."""
    options = "".join(f" {option}" for option in envelope.mail_options)
    commands = f"MAIL FROM:<{envelope.sender}>{options}\r\nRCPT TO:<{envelope.recipient}>\r\nDATA\r\n"
    # UTF-8 only reaches the wire in an SMTPUTF8 transaction (envelope_for refused it otherwise).
    return commands.encode("utf-8")


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    user: str = ""
    password: str = ""
    starttls: bool = False
    timeout_seconds: float = 10.0


def _outcome_for_code(code: int) -> Outcome:
    return Outcome.PERMANENT if 500 <= code < 600 else Outcome.TRANSIENT


class SmtpProvider(Provider):
    name = "smtp"

    def __init__(self, settings: SmtpSettings):
        self.settings = settings
        self._connection: smtplib.SMTP | None = None

    def send_batch(self, emails: Sequence[OutgoingEmail], journal: Journal | None = None) -> list[SendResult]:
        """One transaction per message on one connection, each journaled before it starts and
        when answered (`journal`, decision 92): a worker killed mid-batch leaves proof of which
        messages never left."""
        try:
            connection = self._connect()
        except (*_CONNECTION_ERRORS, smtplib.SMTPException) as exc:
            return results_for_error(emails, TransientError(f"connect failed: {exc}"))
        plans = [self._plan(connection, email) for email in emails]
        if journal is not None:
            journal.opened(self.name)
        results: list[SendResult] = []
        stopped = "connection lost"
        ahead = False  # this message's MAIL, RCPT and DATA already went out behind the last body
        for i, email in enumerate(emails):
            if journal is not None and not journal.starting(email.message_id):
                self._reset(connection, in_flight=ahead)  # commands sent ahead await a body
                stopped = "send journal closed or unwritable"
                break
            following = plans[i + 1] if i + 1 < len(plans) else None
            result, ahead = self._send_one(connection, email, plans[i], ahead, following)
            results.append(result)
            if journal is not None:
                journal.answered(result)
            if result.outcome is Outcome.AMBIGUOUS or self._connection is None:
                break  # the connection is gone
        if journal is not None:
            journal.finished()
        # What was never started was not handed over: the next provider, or a retry, may take it.
        rest = emails[len(results):]
        return results + results_for_error(rest, TransientError(stopped))

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.quit()
            except (*_CONNECTION_ERRORS, smtplib.SMTPException):
                pass
            self._connection = None

    def _connect(self) -> smtplib.SMTP:
        if self._connection is not None and self._connection_alive():
            return self._connection
        connection = smtplib.SMTP(
            self.settings.host, self.settings.port, timeout=self.settings.timeout_seconds
        )
        connection.ehlo_or_helo_if_needed()
        if self.settings.starttls:
            connection.starttls()
            connection.ehlo()
        if self.settings.user:
            connection.login(self.settings.user, self.settings.password)
        self._connection = connection
        return connection

    def _connection_alive(self) -> bool:
        try:
            return self._connection.noop()[0] == 250
        except (*_CONNECTION_ERRORS, smtplib.SMTPException):
            self._connection = None
            return False

    def _plan(self, connection: smtplib.SMTP, email: OutgoingEmail) -> _Plan:
        """Encode addresses and body first: an address that cannot travel fails before MAIL."""
        try:
            header_id = new_message_id_header(email.message_id, email.from_email)
            envelope = envelope_for(email, server_utf8=connection.has_extn("smtputf8"))
            return _Plan(header_id, envelope, build_mime(email, header_id, utf8=envelope.utf8))
        except (AddressError, HeaderError) as exc:  # no retry will change either: PERMANENT
            return _Plan("", None, b"", str(exc))
        except Exception as exc:  # one message's bug must not take its batch down
            logger.exception("SMTP encoding of message %s raised", email.message_id)
            return _Plan("", None, b"", f"{type(exc).__name__}: {exc}"[:500], Outcome.TRANSIENT)

    def _send_one(
        self, connection: smtplib.SMTP, email: OutgoingEmail, plan: _Plan, ahead: bool,
        following: _Plan | None,
    ) -> tuple[SendResult, bool]:
        """(this message's result, whether the next message's commands went out behind its body)."""
        started = time.monotonic()
        ready = following is not None and following.envelope is not None
        step = _Step(ahead=ahead, follow=_commands(following.envelope) if ready else b"")
        try:
            outcome, code, error = self._planned_transaction(connection, plan, step)
        except (TimeoutError, *_CONNECTION_ERRORS) as exc:
            self._connection = None
            outcome, code, error = Outcome.TRANSIENT, "", f"connection lost before DATA: {exc}"
        except Exception as exc:  # one message's bug must not take its batch down
            logger.exception("SMTP send of message %s raised; resetting the transaction", email.message_id)
            self._reset(connection, in_flight=ahead)
            outcome, code, error = Outcome.TRANSIENT, "", f"{type(exc).__name__}: {exc}"[:500]
            step.followed = False
        duration_ms = int((time.monotonic() - started) * 1000)
        provider_id = plan.header_id.strip("<>") if outcome is Outcome.ACCEPTED else ""
        result = SendResult(email.message_id, outcome, provider_id, code, error, None, duration_ms)
        return result, step.followed and self._connection is not None

    def _planned_transaction(
        self, connection: smtplib.SMTP, plan: _Plan, step: _Step
    ) -> tuple[Outcome, str, str]:
        if plan.envelope is None:
            return plan.outcome, "", plan.error
        if connection.has_extn("pipelining"):
            return self._pipelined(connection, plan.envelope, plan.payload, step)
        return self._transaction(connection, plan.envelope, plan.payload)

    def _reset(self, connection: smtplib.SMTP, *, in_flight: bool = False) -> None:
        """RSET (RFC 5321 4.1.1.5) so the next MAIL starts clean; drop the connection otherwise,
        and always when commands sent ahead may still be in flight (RSET could land as body)."""
        if in_flight:
            connection.close()
            self._connection = None
            return
        try:
            if connection.rset()[0] == 250:
                return
        except (*_CONNECTION_ERRORS, smtplib.SMTPException):
            pass
        connection.close()
        self._connection = None

    def _transaction(
        self, connection: smtplib.SMTP, envelope: Envelope, payload: bytes
    ) -> tuple[Outcome, str, str]:
        if connection.has_extn("pipelining"):
            return self._pipelined(connection, envelope, payload)
        code, reply = connection.mail(envelope.sender, envelope.mail_options)
        if code != 250:
            connection.rset()
            return _outcome_for_code(code), str(code), reply.decode(errors="replace")
        code, reply = connection.rcpt(envelope.recipient)
        if code not in (250, 251):
            connection.rset()
            return _outcome_for_code(code), str(code), reply.decode(errors="replace")
        # Not `connection.data()`: it sends a bytes body as is, bare LFs included (only a str
        # body gets CRLF), which RFC 5321 2.3.8 forbids. A connection lost here, before the
        # 354, cannot have handed anything over: _send_one makes it TRANSIENT.
        code, reply = connection.docmd("DATA")
        if code != 354:  # DATA itself refused: nothing was handed over
            connection.rset()
            return _outcome_for_code(code), str(code), reply.decode(errors="replace")
        return self._body(connection, payload)

    def _pipelined(
        self, connection: smtplib.SMTP, envelope: Envelope, payload: bytes, step: _Step | None = None
    ) -> tuple[Outcome, str, str]:
        """MAIL + RCPT + DATA in one write (RFC 2920 3.1: DATA ends the group), then the body,
        followed in the same write by the next message's MAIL + RCPT + DATA ("the actual transfer
        of message content is explicitly allowed to be the first command in a group"): one
        write per message. `step.ahead`: this message's commands already went out that way."""
        step = step or _Step()
        if not step.ahead:
            connection.send(_commands(envelope))
        (mail_code, mail_reply), (rcpt_code, rcpt_reply), (data_code, data_reply) = (
            connection.getreply(), connection.getreply(), connection.getreply()
        )
        refused = next(
            ((code, reply) for code, reply, ok in (
                (mail_code, mail_reply, mail_code == 250),
                (rcpt_code, rcpt_reply, rcpt_code in (250, 251)),
                (data_code, data_reply, data_code == 354),
            ) if not ok),
            None,
        )
        if refused is not None:
            if data_code == 354:  # a server that opened DATA anyway gets an empty body, ended
                connection.send(b".\r\n")
                connection.getreply()
            connection.rset()
            return _outcome_for_code(refused[0]), str(refused[0]), refused[1].decode(errors="replace")
        return self._body(connection, payload, step)

    def _body(
        self, connection: smtplib.SMTP, payload: bytes, step: _Step | None = None
    ) -> tuple[Outcome, str, str]:
        """After the 354 (both paths): the body with CRLF ends, dot-stuffed, and its reply."""
        try:
            follow = step.follow if step else b""
            connection.send(_data_bytes(payload) + follow)
            if step and follow:
                step.followed = True
            code, reply = connection.getreply()
        except Exception as exc:  # noqa: BLE001 - the body may have landed, whatever failed
            # No RSET mid-DATA: the connection is dropped; the next batch reconnects.
            connection.close()
            self._connection = None
            return Outcome.AMBIGUOUS, "", f"no reply to DATA: {type(exc).__name__}: {exc}"[:500]
        if code != 250:
            return _outcome_for_code(code), str(code), reply.decode(errors="replace")
        return Outcome.ACCEPTED, str(code), ""


def build_provider() -> Provider:
    return SmtpProvider(
        SmtpSettings(
            host=django_settings.SMTP_HOST,
            port=django_settings.SMTP_PORT,
            user=django_settings.SMTP_USER,
            password=django_settings.SMTP_PASSWORD,
            starttls=django_settings.SMTP_STARTTLS,
            timeout_seconds=django_settings.SMTP_TIMEOUT_SECONDS,
        )
    )


# Plain SMTP has no event webhook: what it tells us is the reply to each transaction.
ESP = Esp(name="smtp", build_provider=build_provider)
