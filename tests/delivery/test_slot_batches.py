"""One body plus per-recipient substitutions through the batch APIs (templates/slots.py).

The fakes apply the substitutions as the ESPs would, tag after tag over the previous result
(the pessimistic reading: a value holding another tag would be expanded), and keep what each
recipient receives; every test compares that, byte for byte, with the full renderer's output
for that recipient, and counts lost and duplicate messages by our id.
"""

from __future__ import annotations

import json

import pytest

from delivery.providers.base import OutgoingEmail
from delivery.providers.http import HttpSettings
from delivery.providers.mailgun.provider import MailgunProvider
from delivery.providers.sendgrid.provider import SendGridProvider
from templates.rendering import compile_version, compile_version_slots, render, render_for_send
from testkit.fakes.mailgun import parse_form

SUBJECT = "Digest for {{ name }}"
HTML = ('<h1 style="color: #333">Hello {{ name }}</h1><p>Your code: <b>{{ code }}</b>. '
        '<a href="https://x.test/r?c={{ code }}&amp;n={{ name }}">Open</a></p>')


class _Version:
    def __init__(self, key: int, text: str = "") -> None:
        self.id, self.subject, self.html_body, self.text_body = key, SUBJECT, HTML, text


NAMES = ["Ada", "Tom & Jerry", "<script>x()</script>", 'say "hi" \'now\'', "Zoë 😀 中文", "nbsp\xa0x",
         "%recipient.name%", "-notifier_html_part-", "AT&T", "  ", "", 42, "trail "]


def _emails(version: _Version, names: list, start: int = 1) -> list[OutgoingEmail]:
    emails = []
    for i, name in enumerate(names):
        context = {"name": name, "code": f"C{i}<b>\"{i}\""}
        rendered = render_for_send(version, context)
        emails.append(OutgoingEmail(
            message_id=start + i, recipient=f"r{i}@example.com", from_email="news@example.org",
            subject=rendered.subject, text=rendered.text, html=rendered.html,
            headers={"List-Unsubscribe": f"<https://u.example/u/{i}.7:sig{i}/>"}, fill=rendered.fill))
    return emails


def _expected(version: _Version, email: OutgoingEmail, names: list) -> tuple[str, str, str]:
    i = email.message_id - 1
    full = render(compile_version(version.id, version.subject, version.html_body, version.text_body),
                  {"name": names[i], "code": f"C{i}<b>\"{i}\""})
    return full.subject, full.text, full.html


def _assert_each_recipient_got_its_own(fake, version, emails, names) -> None:
    delivered = fake.delivered()
    by_id: dict[str, list] = {}
    for item in delivered:
        by_id.setdefault(item.message_id, []).append(item)
    lost = [e.message_id for e in emails if str(e.message_id) not in by_id]
    dups = {k: len(v) for k, v in by_id.items() if len(v) > 1}
    assert (lost, dups) == ([], {})
    for email in emails:
        (got,) = by_id[str(email.message_id)]
        assert got.recipient == email.recipient
        assert (got.subject, got.text, got.html) == _expected(version, email, names), email.message_id
        assert got.headers["List-Unsubscribe"] == email.headers["List-Unsubscribe"]


def _sg(fake, max_bytes: int = 0) -> SendGridProvider:
    return SendGridProvider(HttpSettings(api_key="test-sendgrid-key", base_url=fake.url,
                                         max_request_bytes=max_bytes))


def _mg(fake, max_bytes: int = 0) -> MailgunProvider:
    return MailgunProvider(HttpSettings(api_key="test-mailgun-key", base_url=fake.url,
                                        domain="mg.example.org", max_request_bytes=max_bytes))


@pytest.mark.parametrize("text", ["", "Hi {{ name }}, code {{ code }}."])
def test_sendgrid_sends_one_body_with_slot_substitutions(sendgrid, text):
    version = _Version(700_001 + len(text), text)
    emails = _emails(version, NAMES)
    assert sum(e.fill is not None for e in emails) >= 8  # most took the join path
    _sg(sendgrid).send_batch(emails)
    _assert_each_recipient_got_its_own(sendgrid, version, emails, NAMES)
    bodies = [json.loads(r.body) for r in sendgrid.received()]
    slot_bodies = [b for b in bodies if any(f"-{emails[0].fill.template.nonce}h" in c["value"]
                                            for c in b["content"])]
    assert slot_bodies, "the slot emails travel as one body with tags"
    assert all(set(p["substitutions"]) >= {f"-{emails[0].fill.template.nonce}h0-"}
               for b in slot_bodies for p in b["personalizations"])


@pytest.mark.parametrize("text", ["", "Hi {{ name }}, code {{ code }}."])
def test_mailgun_sends_one_body_with_recipient_variables(mailgun, text):
    version = _Version(710_001 + len(text), text)
    emails = _emails(version, NAMES)
    _mg(mailgun).send_batch(emails)
    _assert_each_recipient_got_its_own(mailgun, version, emails, NAMES)
    forms = [parse_form(r) for r in mailgun.received()]
    nonce = emails[0].fill.template.nonce
    assert any(f"%recipient.{nonce}h0%" in form["html"][0] for form in forms)


def test_a_value_holding_another_slots_tag_is_never_expanded(sendgrid, mailgun):
    """A recipient whose value is the very tag of another slot gets it literally (it travels
    outside the slot body); with a naive one-body-for-all it would show the other value."""
    version = _Version(720_001)
    nonce = compile_version_slots(version.id, SUBJECT, HTML, "").nonce
    names = ["Ada", f"-{nonce}h1-", f"%recipient.{nonce}h1%", f"-{nonce}h0- and %recipient.{nonce}h0%", "Bob"]
    for fake, provider in ((sendgrid, _sg(sendgrid)), (mailgun, _mg(mailgun))):
        emails = _emails(version, names)
        assert all(e.fill is not None for e in emails)
        provider.send_batch(emails)
        _assert_each_recipient_got_its_own(fake, version, emails, names)


def test_byte_budget_splits_slot_requests_and_counts_the_shared_body(sendgrid, mailgun):
    version = _Version(730_001)
    names = [f"Reader {i}" for i in range(300)]
    emails = _emails(version, names)
    _sg(sendgrid, 64 * 1024 + 20_000).send_batch(emails)
    _mg(mailgun, 64 * 1024 + 20_000).send_batch(emails)
    for fake in (sendgrid, mailgun):
        _assert_each_recipient_got_its_own(fake, version, emails, names)
        assert len(fake.request_sizes()) > 1
        assert max(fake.request_sizes()) <= 64 * 1024 + 20_000


def test_the_send_pipeline_hands_slot_fills_to_the_batch_api(sendgrid, settings):
    """Claim, render (slots), hand-off and record through message_batch_send and fake SendGrid."""
    from delivery.models import EmailMessage
    from delivery.providers import get_provider
    from delivery.services.sending import message_batch_send
    from tests.factories import email_message, template_version

    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    settings.SENDGRID_API_URL, settings.SENDGRID_API_KEY = sendgrid.url, "test-sendgrid-key"
    get_provider.cache_clear()
    version = template_version(subject=SUBJECT, html_body=HTML)
    names = ["Ada", "<b>Bold</b> & co", "Zoë", "%recipient.name%", "x"]
    messages = [email_message(version=version, context={"name": n, "code": f"C{i}"}, priority=2)
                for i, n in enumerate(names)]
    report = message_batch_send(message_ids=[m.id for m in messages], token="slot-pipeline")
    assert report.sent == len(names)
    delivered = {d.message_id: d for d in sendgrid.delivered()}
    assert len(delivered) == len(names) == len(sendgrid.delivered())
    for message in messages:
        full = render(compile_version(version.id, version.subject, version.html_body, version.text_body),
                      message.context)
        got = delivered[str(message.id)]
        assert (got.subject, got.text, got.html) == (full.subject, full.text, full.html)
    assert set(EmailMessage.objects.filter(id__in=[m.id for m in messages])
               .values_list("status", flat=True)) == {"SENT"}
    body = json.loads(sendgrid.received()[0].body)
    assert "Hello -" in body["content"][1]["value"]  # one body with tags, not whole bodies


pytestmark = pytest.mark.django_db


def test_the_request_body_is_the_json_of_the_documented_shape():
    """encoded_body reuses the personalizations the size estimate encoded; it must be exactly
    the JSON of mail_send_body, for slot, whole-body and literal requests alike."""
    from delivery.providers.sendgrid.provider import encoded_body, mail_send_body

    version = _Version(740_001)
    emails = _emails(version, NAMES)
    slot = [e for e in emails if e.fill is not None]
    literal = [OutgoingEmail(e.message_id, e.recipient, e.from_email, "Same", "t", "<p>h</p>")
               for e in emails]
    for chunk in (slot, emails, literal):
        assert encoded_body(chunk) == json.dumps(mail_send_body(chunk)).encode("ascii")


def test_the_mailgun_form_body_is_what_urlencode_writes():
    """form_body replaces requests' urlencode (quote_plus byte by byte): same bytes, including
    non-ASCII, spaces, reserved characters and the recipient-variables JSON."""
    from urllib.parse import urlencode

    from delivery.providers.mailgun.provider import form_body, message_form

    version = _Version(750_001)
    emails = _emails(version, NAMES)
    fields = [*message_form(emails), ("x", "a b+c&d=e%f/é😀\n~_.-")]
    assert form_body(fields) == urlencode(fields).encode("ascii")
