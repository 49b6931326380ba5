"""Addresses as the wire wants them: IDNA domains, encoded display names, SMTPUTF8 local parts.

A stored address may carry a Unicode domain (`user@bücher.example`, accepted by the API) and the
From setting a Unicode display name (`Jürgen <news@example.com>`). No ESP and no SMTP server
without SMTPUTF8 (RFC 6531) takes either raw, so every provider goes through `mailbox()`:

- the domain becomes its IDNA A-label form (`xn--bcher-kva.example`, core/addresses.py, the
  encoder the API normalises with); an ASCII domain is left exactly as given;
- a non-ASCII local part cannot be encoded at all: it needs SMTPUTF8, so `mailbox()` refuses it
  (`AddressError`, a permanent failure of that one message) unless the caller says the
  transport carries UTF-8;
- the display name is RFC 2047 encoded *on its own*, outside the angle brackets (RFC 2047
  section 5 forbids an encoded word in an addr-spec), by the standard library's formatters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from email.headerregistry import Address
from email.policy import SMTP, SMTPUTF8
from email.utils import formataddr, parseaddr
from functools import lru_cache

from core.addresses import AddressError, ascii_domain
from delivery.providers.base import Outcome, OutgoingEmail, SendResult

MAX_LINE = 998  # RFC 5322 2.1.1, octets without the CRLF
# A bare ASCII address parseaddr would return unchanged (dot-atom local part, LDH domain): the
# common case skips the RFC 5322 parser (~25 us a recipient).
_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
                            r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*")


@dataclass(frozen=True)
class Mailbox:
    display_name: str
    local_part: str
    domain: str  # ASCII: IDNA-encoded when the given domain was not

    @property
    def addr_spec(self) -> str:
        return f"{self.local_part}@{self.domain}"

    @property
    def needs_utf8(self) -> bool:
        return not self.local_part.isascii()

    def formatted(self) -> str:
        """`"Name" <addr>` on one line, the name RFC 2047 encoded if not ASCII (SES, Mailgun)."""
        return formataddr((self.display_name, self.addr_spec))

    def header_line(self, name: str) -> str:
        """`Name: value` folded (CRLF) without its final line end, as RFC 5322/2047 want it."""
        if self.display_name.isascii() and not self.needs_utf8:
            # formataddr quotes an ASCII name as RFC 5322 wants; the policy's folder costs
            # ~65 us a header, seven times the rest of a small message's build (decision 43).
            line = f"{name}: {self.formatted()}"
            if len(line) <= MAX_LINE:
                return line
        policy = SMTPUTF8 if self.needs_utf8 else SMTP
        address = Address(self.display_name, self.local_part, self.domain)
        return policy.header_factory(name, address).fold(policy=policy).removesuffix("\r\n")


@lru_cache(maxsize=4096)  # the sender is the same for nearly every message of a process
def mailbox(value: str, *, utf8: bool = False) -> Mailbox:
    """Parse `addr` or `Name <addr>`; `utf8` says whether a non-ASCII local part may travel."""
    if _PLAIN_ADDRESS.fullmatch(value):
        local_part, _, domain = value.rpartition("@")
        return Mailbox("", local_part, domain)
    display_name, addr_spec = parseaddr(value)
    local_part, at, domain = addr_spec.rpartition("@")
    if not at or not local_part or not domain:
        raise AddressError(f"not an address: {value!r}")
    if not local_part.isascii() and not utf8:
        raise AddressError(f"local part of {addr_spec!r} is not ASCII and SMTPUTF8 is not available")
    return Mailbox(display_name, local_part, ascii_domain(domain))


def wire_address(recipient: str) -> str:
    """The address as an HTTP ESP was sent it (IDNA domain); empty for one that could not have
    been (an ESP lookup then has nothing to ask about)."""
    try:
        return mailbox(recipient).addr_spec
    except AddressError:
        return ""


def wire_emails(emails: Sequence[OutgoingEmail]) -> tuple[list[OutgoingEmail], list[SendResult]]:
    """For the ESP APIs: the emails with their recipient in wire form (IDNA domain), and a
    PERMANENT result for each whose sender or recipient cannot travel. None of SES, SendGrid or
    Mailgun documents SMTPUTF8 (SES: "the local part ... can contain only 7-bit ASCII
    characters"), so a non-ASCII local part fails that one message instead of its request."""
    ready: list[OutgoingEmail] = []
    refused: list[SendResult] = []
    for email in emails:
        try:
            mailbox(email.from_email)
            recipient = mailbox(email.recipient).addr_spec
        except AddressError as exc:
            refused.append(SendResult(email.message_id, Outcome.PERMANENT, error=str(exc)[:500]))
            continue
        ready.append(email if recipient == email.recipient else replace(email, recipient=recipient))
    return ready, refused
