"""List-* header fields of `<URL>` entries: folded between entries, never RFC 2047 encoded.

RFC 2369 (List-Help, -Unsubscribe, -Subscribe, -Post, -Owner, -Archive) fills these fields with
angle-bracketed URLs, comma separated, each optionally followed by a comment. RFC 2047 section 5
allows an encoded word only in unstructured text, a comment or a phrase, so an encoded URL is no
URL: mail clients showed no unsubscribe link (issue 32). `email.policy` cannot fold such a field:
its folder (`_refold_parse_tree`) reads it as unstructured text and encodes any word too long for
its line. So a value is laid out here instead:

- a line that fits 998 octets (RFC 5322 2.1.1) is written as given, as for any other header;
- otherwise it is folded (CRLF and a space) only between tokens: after an entry's comma, or
  after a URL's closing `>` before its comment; a URL is never broken, so a URL too long for a
  line of its own (" <URL>," is 998 octets at most: a URL of 994 characters followed by another
  entry) has no legal form: `HeaderError`, which the API answers with a 400 naming the header
  and the SMTP provider with a PERMANENT failure of that one message;
- a non-ASCII value travels raw only in an SMTPUTF8 transaction (RFC 6532); otherwise it is a
  `HeaderError` too (a URL is percent-encoded by whoever builds it, RFC 3987 3.1).

Unfolding (RFC 5322 2.2.3: removing each CRLF before a space) gives the same entries back.
List-Unsubscribe-Post (RFC 8058) is not a list of URLs and is short: an ordinary header.
"""

from __future__ import annotations

import re

MAX_LINE = 998  # RFC 5322 2.1.1, octets without the CRLF
URL_LIST_HEADERS = frozenset(
    {"list-help", "list-unsubscribe", "list-subscribe", "list-post", "list-owner", "list-archive"}
)
# A token is a run of `<URL>`s, `(comment)`s and other non-space characters, with its trailing
# comma. Every non-space character matches one branch (an unclosed `<` or `(` is an ordinary
# character), so the tokens joined by spaces hold the whole value: nothing is lost.
_TOKEN = re.compile(r"(?:<[^>]*>|\([^)]*\)|[^\s<(,]|[<(])+,?|,")


class HeaderError(ValueError):
    """A header value that has no legal form on the wire; no retry will change that."""


def is_url_list(name: str) -> bool:
    return name.lower() in URL_LIST_HEADERS


def _octets(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def url_list_header_line(name: str, value: str, *, utf8: bool = False) -> str:
    """`Name: value`, folded (CRLF) between entries when one line cannot hold it, without its line
    end; HeaderError when no legal form exists."""
    if not utf8 and not value.isascii():
        raise HeaderError(f"{name} is not ASCII: a URL in it must be percent-encoded "
                          "(RFC 2047 forbids encoding it)")
    line = f"{name}: {value}"
    if _octets(line) <= MAX_LINE:
        return line
    lines = [f"{name}:"]
    for token in _TOKEN.findall(value):
        if _octets(lines[-1]) + 1 + _octets(token) <= MAX_LINE:
            lines[-1] += " " + token
        elif 1 + _octets(token) <= MAX_LINE:
            lines.append(" " + token)
        else:
            raise HeaderError(f"{name} has an entry of {len(token)} characters: a URL is never "
                              f"broken, and with its folding space it cannot fit a line of "
                              f"{MAX_LINE} octets")
    return "\r\n".join(lines)
