"""F21 at the wire: header injection through the API, followed all the way to what an ESP receives.

The API refuses, with a 400 naming the field, every value that would itself become a header line
or a recipient (subjects, addresses, display names, reply-to, custom headers, contact names)
and writes nothing. What it accepts, merge data above all, can still reach a header: the subject
renders it. Those messages are sent by real worker processes, P0 to a recording SMTP server, P1
to a fake SendGrid, a campaign (P2, fanned out by the ops pool) to a fake Mailgun, and the test
reads what arrived: the raw SMTP message and its envelope, each HTTP request's body and what
the ESP would deliver after its substitutions. No header beyond the ones we write, no Bcc/Cc,
no recipient but the addressee, no line break in any header value; each message exactly once.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from email.utils import getaddresses

import pytest
import requests

from campaigns.models import Campaign
from delivery.models import EmailMessage
from templates.models import Template
from testkit import processes
from testkit.fakes import FakeMailgun, FakeSendGrid
from testkit.fakes.mailgun import parse_form
from testkit.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Status = EmailMessage.Status
# Every way a value could end a header line, raw or in an encoding someone may decode.
INJECTIONS = [
    "1\r\nBcc: victim@evil.example",
    "2\nBcc: victim@evil.example",
    "3\rBcc: victim@evil.example",
    "4\r\n\r\n<p>smuggled body</p>",
    "5\r\n Bcc: folded@evil.example",
    "6%0d%0aBcc: victim@evil.example",
    "7%250A%250ABcc: victim@evil.example",
    "8\u2028Bcc: victim@evil.example",
    "9\x85Bcc: victim@evil.example",
    "10\x0bBcc: victim@evil.example",
    "=?utf-8?q?11=0D=0ABcc:_victim@evil.example?=",
    "=?utf-8?b?MTINCkJjYzogdmljdGltQGV2aWwuZXhhbXBsZQ==?=",
]
LINE_BREAK = re.compile("[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# The headers our MIME writer puts on a message (delivery/providers/mime.py) and campaigns add.
SMTP_HEADERS = {"content-type", "mime-version", "subject", "from", "to", "date", "message-id",
                "x-notifier-message-id", "list-unsubscribe", "list-unsubscribe-post"}
ESP_HEADERS = {"X-Notifier-Message-Id", "List-Unsubscribe", "List-Unsubscribe-Post"}
SENDGRID_KEYS = {"personalizations", "from", "subject", "content", "custom_args", "headers"}
MAILGUN_KEYS = {"from", "to", "subject", "text", "html", "recipient-variables"}


@pytest.fixture
def esps() -> Iterator[tuple[FakeSendGrid, FakeMailgun]]:
    with FakeSendGrid(record_requests=True) as sendgrid, FakeMailgun(record_requests=True) as mailgun:
        yield sendgrid, mailgun


def _post(live_server, key: str, path: str, body: object) -> requests.Response:
    return requests.post(f"{live_server.url}{path}", json=body, timeout=10,
                         headers={"Authorization": f"Api-Key {key}"})


def _assert_400_naming(response: requests.Response, field: str, *inner: str) -> None:
    assert response.status_code == 400, (response.status_code, response.text)
    error = response.json()["error"]
    # A nested field is named by its path (`variants.fr.subject`, `recipients.contacts[0].name`).
    named = {path: messages for path, messages in error["fields"].items()
             if path == field or path.startswith((f"{field}.", f"{field}["))}
    assert named, error
    assert all(name in json.dumps(named) for name in inner), error


def _refused_at_the_api(live_server, key: str) -> None:
    """Values that would be a header line or a recipient of their own: 400 naming the field."""
    subject = {"name": "bad", "html_body": "<p>x</p>"}
    for value in INJECTIONS:  # each is two lines, or decodes to two
        response = _post(live_server, key, "/api/v1/templates", {**subject, "subject": value})
        _assert_400_naming(response, "subject")
    french = {"subject": INJECTIONS[0], "html_body": "<p>x</p>"}
    variant = {**subject, "subject": "ok", "variants": {"fr": french}}
    _assert_400_naming(_post(live_server, key, "/api/v1/templates", variant), "variants", "subject")
    otp = {"template": "wire", "priority": "critical", "context": {"code": "1", "name": "Ada"}}
    for to in ["ada@example.com\r\nBcc: victim@evil.example", "ada@example.com%0d%0aBcc: v@evil.example",
               "Ada <ada@example.com>", '"Ada\r\nBcc: victim@evil.example" <ada@example.com>',
               "ada@example.com, victim@evil.example", "ada@example.com\u2028"]:
        _assert_400_naming(_post(live_server, key, "/api/v1/messages", {**otp, "to": to}), "to")
    for extra in ({"reply_to": "x@example.com\r\nBcc: victim@evil.example"},
                  {"headers": {"Reply-To": "x@example.com", "Bcc": "victim@evil.example"}},
                  {"from_name": "Ada\r\nBcc: victim@evil.example"}, {"bcc": "victim@evil.example"}):
        response = _post(live_server, key, "/api/v1/messages", {**otp, "to": "a@example.com", **extra})
        _assert_400_naming(response, next(iter(extra)))
    for contact, field in (({"email": "r@example.com", "name": "Ada\r\nBcc: victim@evil.example"}, "name"),
                           ({"email": "r@example.com\r\nBcc: victim@evil.example"}, "email")):
        campaign = {"template_id": "wire", "recipients": {"type": "inline", "contacts": [contact]}}
        response = _post(live_server, key, "/api/v1/notifications/email", campaign)
        _assert_400_naming(response, "recipients", field)
    assert not Template.objects.exclude(name="wire").exists()
    assert not EmailMessage.objects.exists() and not Campaign.objects.exists()


def _accepted_sends(live_server, key: str) -> tuple[dict[str, str], dict[str, str]]:
    """Each injection as merge data, once to P0 (SMTP), once to P1 (SendGrid), once to a campaign
    recipient (Mailgun, through its batch substitutions); {recipient: priority label}."""
    smtp, sendgrid = {}, {}
    for n, value in enumerate(INJECTIONS):
        for priority, sent in (("critical", smtp), ("high", sendgrid)):
            to = f"{priority}{n}@example.com"
            context = {"code": value, "name": value}
            body = {"to": to, "template": "wire", "priority": priority, "context": context}
            response = _post(live_server, key, "/api/v1/messages", body)
            assert response.status_code == 202, response.text
            sent[to] = str(response.json()["id"])
    contacts = [{"email": f"reader{n}@example.com", "name": value.replace("\r", "").replace("\n", ""),
                 "data": {"code": value}} for n, value in enumerate(INJECTIONS)]
    campaign = {"template_id": "wire", "recipients": {"type": "inline", "contacts": contacts},
                "priority": "normal"}
    response = _post(live_server, key, "/api/v1/notifications/email", campaign)
    assert response.status_code == 202, response.text
    return smtp, sendgrid


def _start_workers(spawn, tmp_path, process_env: dict, sendgrid: FakeSendGrid, mailgun: FakeMailgun) -> None:
    esp = {"SENDGRID_API_URL": sendgrid.url, "SENDGRID_API_KEY": "test-sendgrid-key",
           "MAILGUN_API_URL": mailgun.url, "MAILGUN_API_KEY": "test-mailgun-key",
           "MAILGUN_DOMAIN": "mg.example.org"}
    workers = [spawn(processes.ops_worker(process_env, tmp_path, concurrency=1))]
    for role, provider in (("critical", "smtp"), ("high", "sendgrid"), ("normal", "mailgun")):
        env = {**process_env, **esp, "NOTIFIER_PROVIDERS": provider}
        workers.append(spawn(processes.celery_worker(role, env, tmp_path, concurrency=1)))
    for worker in workers:
        worker.wait_for_log("ready.", timeout=120)


def _smtp_header_block(raw: bytes) -> list[str]:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    assert "\n" not in head.replace("\r\n", "") and "\r" not in head.replace("\r\n", "")
    return head.split("\r\n")


def _assert_smtp_clean(handler, expected: dict[str, str]) -> None:
    assert sorted(rcpts[0] for _, rcpts, _ in handler.envelopes) == sorted(expected)
    assert all(len(rcpts) == 1 for _, rcpts, _ in handler.envelopes)
    for raw, (_, [rcpt], _) in zip(handler.raw, handler.envelopes, strict=True):
        lines = _smtp_header_block(raw)
        names = [line.split(":", 1)[0].lower() for line in lines if not line[:1].isspace()]
        assert set(names) <= SMTP_HEADERS and len(names) == len(set(names)), names
        to = [line for line in lines if line.lower().startswith("to:")]
        assert to == [f"To: {rcpt}"]


def _assert_sendgrid_clean(fake: FakeSendGrid, expected: dict[str, str]) -> None:
    for request in fake.received():
        body = request.json()
        assert set(body) <= SENDGRID_KEYS, set(body)
        for pers in body["personalizations"]:
            assert set(pers) <= {"to", "subject", "headers", "custom_args", "substitutions"}, set(pers)
            assert [to["email"] for to in pers["to"]] in ([e] for e in expected)
    for delivered in fake.delivered():
        assert not LINE_BREAK.search(delivered.subject), delivered.subject
        assert set(delivered.headers) <= ESP_HEADERS, delivered.headers
        assert not any(LINE_BREAK.search(value) for value in delivered.headers.values())


def _assert_mailgun_clean(fake: FakeMailgun, expected: set[str]) -> None:
    for request in fake.received():
        form = parse_form(request)
        names = {name for name in form if not name.startswith(("h:", "v:", "o:"))}
        assert names <= MAILGUN_KEYS, names
        assert {name[2:] for name in form if name.startswith("h:")} <= ESP_HEADERS
        assert {address for _, address in getaddresses(form["to"])} <= expected
    for delivered in fake.delivered():
        assert not LINE_BREAK.search(delivered.subject), delivered.subject
        assert set(delivered.headers) <= ESP_HEADERS, delivered.headers
        assert not any(LINE_BREAK.search(value) for value in delivered.headers.values())


def test_header_injection_is_refused_at_the_api_and_reaches_no_esp(
    live_server, api_key, smtp_server, process_env, esps, spawn, tmp_path
):
    sendgrid, mailgun = esps
    template = {"name": "wire", "subject": "Code {{ code }} for {{ name }}",
                "html_body": "<p>{{ code }}</p>", "text_body": "{{ code }}"}
    assert _post(live_server, api_key, "/api/v1/templates", template).status_code == 201
    _refused_at_the_api(live_server, api_key)
    _start_workers(spawn, tmp_path, process_env, sendgrid, mailgun)
    smtp, sent_by_sendgrid = _accepted_sends(live_server, api_key)
    readers = {f"reader{n}@example.com" for n in range(len(INJECTIONS))}

    every = 2 * len(INJECTIONS) + len(readers)
    done = lambda: EmailMessage.objects.filter(status=Status.SENT).count() == every  # noqa: E731
    statuses = lambda: Counter(EmailMessage.objects.values_list("status", flat=True))  # noqa: E731
    assert wait_for(done, timeout=90, interval=0.2), statuses()

    print(f"smtp {len(smtp_server.handler.raw)} messages, sendgrid {len(sendgrid.received())} requests, "
          f"mailgun {len(mailgun.received())} requests "
          f"({sum('recipient-variables' in parse_form(r) for r in mailgun.received())} batched)")
    # Nothing injected reached a wire: no extra header, no Bcc/Cc, no line break in a header value.
    _assert_smtp_clean(smtp_server.handler, smtp)
    _assert_sendgrid_clean(sendgrid, sent_by_sendgrid)
    _assert_mailgun_clean(mailgun, readers)
    # Each message arrived once, where it was sent, at its addressee only.
    assert Counter(smtp_server.handler.ids()) == Counter(smtp.values())
    assert Counter(e.message_id for e in sendgrid.ledger.entries()) == Counter(sent_by_sendgrid.values())
    assert Counter(e.recipient for e in mailgun.ledger.entries()) == Counter(readers)
    assert [e for e in mailgun.ledger.entries() if e.message_id is None] == []
