"""Build MIME bytes fast.

The message is the same multipart/alternative the compat32 classes (`MIMEMultipart` +
two `MIMEText(..., "utf-8")`) produce: text then HTML (RFC 2046 orders preference), each part
base64 in UTF-8. Line ends are CRLF, the canonical form on the wire (RFC 5322 2.1, RFC 5321
2.3.8): smtplib converts bare LF only in a `str` body, never in bytes, and a server such as
aiosmtpd reads lines up to CRLF, so an LF-only message over ~1 KB was refused as one over-long
line. The SMTP provider only dot-stuffs what is built here. It is written out directly:
the compat32 generator spent ~670 us per message (header folding, policy lookups, a deep copy
per part: bench profile in docs/benchmarks.md); this writer spends ~20 us.

Headers: an ASCII value whose line fits 998 octets is written as is (RFC 5322 2.1.1; a
List-Unsubscribe URL must stay one unbroken token, and this path costs next to nothing); a
non-ASCII or over-long value is folded by `email.policy.SMTP` (RFC 2047 encoded words of at most
78 octets a line, so even a long unbroken value cannot make a line over 998: `email.header.Header`
left such a value on one line). The List-* fields of `<URL>`s (List-Unsubscribe...) are never
encoded (RFC 2047 section 5): core/list_headers.py folds them between entries, and a URL too long
for a line of its own, or non-ASCII without SMTPUTF8, is a HeaderError (issue 32). From and To
go through `addresses.Mailbox`: the display name is encoded on its own and the address keeps its
IDNA domain outside any encoded word (RFC 2047 section 5). `utf8=True` (an SMTPUTF8 transaction,
RFC 6531) writes a non-ASCII local part raw. CR and LF in a value become spaces: a header value
can never start a new header.

The boundary and the Message-ID's unique part come from `random` (reseeded in every forked
child), not the OS: both need uniqueness, not secrecy (the parts are base64, which cannot hold a
boundary line; the Message-ID starts with the row id), and reading `os.urandom` twice a message
was ~8% of the send path's CPU (docs/decisions.md 66).
"""

from __future__ import annotations

import base64
import random
from email.policy import SMTP
from email.utils import formatdate

from core.addresses import AddressError
from core.list_headers import is_url_list, url_list_header_line
from delivery.providers.addresses import mailbox
from delivery.providers.base import OutgoingEmail

MESSAGE_ID_HEADER = "X-Notifier-Message-Id"
_MAX_PLAIN_LINE = 998
CRLF = "\r\n"
_PART_HEADERS = (
    'Content-Type: text/{subtype}; charset="utf-8"\r\nMIME-Version: 1.0\r\n'
    "Content-Transfer-Encoding: base64\r\n\r\n"
)


def new_message_id_header(message_id: int, from_email: str) -> str:
    try:
        domain = mailbox(from_email, utf8=True).domain  # ASCII: a Message-ID is never encoded
    except AddressError:
        domain = "notifier.local"
    return f"<{message_id}.{random.getrandbits(128):032x}@{domain}>"


def header_line(name: str, value: str, *, utf8: bool = False) -> str:
    """`Name: value` without its line end; encoded (RFC 2047) only when it has to be and may be."""
    value = value.replace("\r", " ").replace("\n", " ")
    if is_url_list(name):
        return url_list_header_line(name, value, utf8=utf8)
    if value.isascii() and len(name) + len(value) + 2 <= _MAX_PLAIN_LINE:
        return f"{name}: {value}"
    return SMTP.header_factory(name, value).fold(policy=SMTP).removesuffix(CRLF)


def _part(subtype: str, body: str) -> str:
    encoded = base64.encodebytes(body.encode("utf-8")).decode("ascii")  # 76-char lines, LF ends
    return _PART_HEADERS.format(subtype=subtype) + encoded.replace("\n", CRLF)


def build_mime(
    email: OutgoingEmail,
    message_id_header: str,
    *,
    boundary: str = "",
    date: str = "",
    utf8: bool = False,
) -> bytes:
    """multipart/alternative with text then HTML, as RFC 2046 orders preference.

    `boundary` and `date` are random and now unless given (a test rebuilds a received message
    byte for byte with the ones it carries). AddressError if From or To cannot be encoded,
    HeaderError if a List-* header cannot (core/list_headers.py).
    """
    boundary = boundary or f"==============={random.randrange(10**19):019d}=="
    headers = [
        f'Content-Type: multipart/alternative; boundary="{boundary}"',
        "MIME-Version: 1.0",
        header_line("Subject", email.subject),
        mailbox(email.from_email, utf8=utf8).header_line("From"),
        mailbox(email.recipient, utf8=utf8).header_line("To"),
        f"Date: {date or formatdate(localtime=False)}",
        header_line("Message-ID", message_id_header),
        f"{MESSAGE_ID_HEADER}: {email.message_id}",
    ]
    headers.extend(header_line(name, value, utf8=utf8) for name, value in email.headers.items())
    text = CRLF.join(
        (
            CRLF.join(headers),
            "",
            f"--{boundary}",
            _part("plain", email.text),
            f"--{boundary}",
            _part("html", email.html),
            f"--{boundary}--",
            "",
        )
    )
    return text.encode("utf-8" if utf8 else "ascii")
