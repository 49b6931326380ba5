"""Issue 32: a List-* header of `<URL>` entries is folded between entries, never RFC 2047 encoded.

Before the fix a List-Unsubscribe line over 998 octets went through `email.policy.SMTP`, which
encodes a word too long for a line (`=?utf-8?q?=3Chttps=3A//...?=`); RFC 2047 section 5 forbids
an encoded word there and mail clients found no unsubscribe link.
"""

from __future__ import annotations

import email
from collections.abc import Iterator
from email import policy

import pytest

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.mime import build_mime
from delivery.providers.smtp import SmtpProvider, SmtpSettings

MAX_LINE = 998
# The longest URL a line can carry on its own: " <" + URL + ">," is 998 octets.
LONGEST_URL = 994


def _url(length: int) -> str:
    head = "https://notifier.example.com/u/"
    return head + ("A1b2C3d4" * length)[: length - len(head)]


LONG_URL = _url(990)
MAILTO = "mailto:unsubscribe@notifier.example.com?subject=unsubscribe"
LONG_VALUE = f"<{LONG_URL}>, <{MAILTO}>"  # ~1,060 characters: cannot be one line


def _email(message_id: int = 1, headers: dict[str, str] | None = None) -> OutgoingEmail:
    return OutgoingEmail(message_id, "reader@example.com", "News <news@example.com>", "Subject",
                         "text", "<p>html</p>", headers or {})


def _head_lines(raw: bytes) -> list[bytes]:
    return raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")


def _header_lines(raw: bytes, name: str) -> list[bytes]:
    """The physical lines of header `name`: its first line and the continuation lines after it."""
    lines, found = [], False
    for line in _head_lines(raw):
        if line.lower().startswith(name.lower().encode() + b":"):
            found = True
        elif found and line[:1] not in (b" ", b"\t"):
            break
        if found:
            lines.append(line)
    return lines


def _entries(value: str) -> list[str]:
    return [entry.strip() for entry in value.split(",")]


def _assert_folded_between_entries(raw: bytes, name: str, value: str) -> None:
    lines = _header_lines(raw, name)
    assert len(lines) > 1, "a value over 998 octets must be folded"
    assert not any(b"=?" in line for line in lines), lines[0][:120]
    assert max(len(line) for line in _head_lines(raw)) <= MAX_LINE
    received = email.message_from_bytes(raw, policy=policy.default)
    assert _entries(str(received[name])) == _entries(value)
    for line in lines[1:]:  # every break is after a comma or a closing '>', none inside a URL
        assert line.startswith(b" <")


@pytest.mark.parametrize("name", ["List-Unsubscribe", "List-Help", "List-Archive", "List-Owner",
                                  "List-Subscribe", "List-Post"])
def test_long_list_header_is_folded_between_entries_not_encoded(name):
    raw = build_mime(_email(headers={name: LONG_VALUE}), "<1.a@example.com>")
    _assert_folded_between_entries(raw, name, LONG_VALUE)


def test_a_url_as_long_as_a_line_allows_stays_whole_on_its_own_line():
    url = _url(LONGEST_URL)
    value = f"<{url}>, <{MAILTO}>"
    raw = build_mime(_email(headers={"List-Unsubscribe": value}), "<1.a@example.com>")
    _assert_folded_between_entries(raw, "List-Unsubscribe", value)
    assert f" <{url}>,".encode() in _header_lines(raw, "List-Unsubscribe")


def test_a_comment_after_a_url_may_go_to_the_next_line():
    value = f"<{_url(960)}> (unsubscribe from this list of the example newsletter), <{MAILTO}>"
    raw = build_mime(_email(headers={"List-Unsubscribe": value}), "<1.a@example.com>")
    lines = _header_lines(raw, "List-Unsubscribe")
    assert not any(b"=?" in line for line in lines)
    assert max(len(line) for line in lines) <= MAX_LINE
    assert lines[0].endswith(b">") and lines[1].startswith(b" (unsubscribe")
    received = email.message_from_bytes(raw, policy=policy.default)
    assert _entries(str(received["List-Unsubscribe"])) == _entries(value)


@pytest.mark.parametrize("value", [
    "<https://notifier.example.com/u/1.2:abc/>",
    f"<https://notifier.example.com/u/1.2:abc/>,<{MAILTO}>",
    "<mailto:list@host.com?subject=help> (List Instructions)",
])
def test_a_header_that_fits_its_line_is_written_unchanged(value):
    raw = build_mime(_email(headers={"List-Unsubscribe": value}), "<1.a@example.com>")
    assert _header_lines(raw, "List-Unsubscribe") == [f"List-Unsubscribe: {value}".encode()]


def test_the_campaign_header_pair_is_unchanged():
    short = {"List-Unsubscribe": "<https://notifier.example.com/u/1.2:abc/>",
             "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
    raw = build_mime(_email(headers=short), "<1.a@example.com>")
    assert b"\r\nList-Unsubscribe: <https://notifier.example.com/u/1.2:abc/>\r\n" in raw
    assert b"\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in raw


def test_other_headers_keep_their_folding():
    # An unstructured header that is too long is still folded by the policy (RFC 2047 is allowed
    # in unstructured text): only the List-* URL headers changed.
    raw = build_mime(_email(headers={"X-Tag": "t" * 998}), "<1.a@example.com>")
    assert b"=?utf-8?q?" in b"".join(_header_lines(raw, "X-Tag"))


@pytest.fixture
def provider(smtp_server) -> Iterator[SmtpProvider]:
    provider = SmtpProvider(SmtpSettings(host="127.0.0.1", port=smtp_server.port, timeout_seconds=2))
    yield provider
    provider.close()


def test_through_a_real_smtp_send_the_entries_arrive_whole(provider, smtp_server):
    results = provider.send_batch([_email(1, {"List-Unsubscribe": LONG_VALUE,
                                              "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"})])
    assert [(r.outcome, r.error) for r in results] == [(Outcome.ACCEPTED, "")]
    raw = smtp_server.handler.raw[0]
    _assert_folded_between_entries(raw, "List-Unsubscribe", LONG_VALUE)
    received = email.message_from_bytes(raw, policy=policy.default)
    assert received["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_a_url_longer_than_a_line_fails_that_message_permanently_and_is_never_sent(provider, smtp_server):
    # RFC 5322 2.1.1 allows no line over 998 octets and a URL must not be encoded or broken, so
    # there is no way to send it: that one message fails PERMANENT, naming the header.
    too_long = f"<{_url(LONGEST_URL + 1)}>, <{MAILTO}>"
    results = provider.send_batch([_email(1, {"List-Unsubscribe": too_long}),
                                   _email(2, {"List-Unsubscribe": LONG_VALUE})])
    assert [r.outcome for r in results] == [Outcome.PERMANENT, Outcome.ACCEPTED]
    assert "List-Unsubscribe" in results[0].error and "998" in results[0].error
    assert smtp_server.handler.ids() == ["2"]


def test_a_non_ascii_url_is_never_encoded(provider, smtp_server):
    # Without SMTPUTF8 a non-ASCII List-* value has no legal form (RFC 2047 5 forbids encoding
    # it; a URL is percent-encoded by whoever builds it): that message fails PERMANENT.
    results = provider.send_batch([_email(1, {"List-Unsubscribe": "<https://bücher.example/u/ü>"})])
    assert results[0].outcome is Outcome.PERMANENT and "List-Unsubscribe" in results[0].error
    assert smtp_server.handler.ids() == []


def test_with_smtputf8_a_non_ascii_url_is_written_raw():
    value = "<https://bücher.example/u/ü>"
    raw = build_mime(_email(headers={"List-Unsubscribe": value}), "<1.a@example.com>", utf8=True)
    assert _header_lines(raw, "List-Unsubscribe") == [f"List-Unsubscribe: {value}".encode()]
