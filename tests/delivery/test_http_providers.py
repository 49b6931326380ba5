"""SendGrid, Mailgun and SES providers against the fake ESPs' wire formats (boto3 for SES).

Each test counts what the fake's ledger accepted: lost and duplicate messages, by our id.
"""

from __future__ import annotations

import json

import pytest

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.http import HttpSettings
from delivery.providers.mailgun.provider import MailgunProvider
from delivery.providers.sendgrid.provider import SendGridProvider
from delivery.providers.ses.provider import SesProvider, SesSettings
from testkit.fakes import FakeMailgun, FakeSendGrid, FakeSES
from testkit.fakes.mailgun import parse_form


def _emails(n: int, *, same: bool = False, start: int = 1) -> list[OutgoingEmail]:
    return [
        OutgoingEmail(
            message_id=start + i,
            recipient=f"user{i}@example.com",
            from_email="notifier@example.org",
            subject="Hello" if same else f"Hello {i}",
            text="plain" if same else f"plain {i}",
            html="<p>html</p>" if same else f"<p>html {i}</p>",
            headers={"List-Unsubscribe": f"<https://u.example/{i}>"},
        )
        for i in range(n)
    ]


def _assert_exactly_once(ledger, emails) -> None:
    got = ledger.by_message_id()
    lost = [e.message_id for e in emails if str(e.message_id) not in got]
    dups = {k: len(v) for k, v in got.items() if len(v) > 1}
    assert (lost, dups) == ([], {})


def _sg(fake: FakeSendGrid, **kw) -> SendGridProvider:
    return SendGridProvider(HttpSettings(api_key="test-sendgrid-key", base_url=fake.url,
                                         read_timeout=kw.get("read_timeout", 5)))


def _mg(fake: FakeMailgun, **kw) -> MailgunProvider:
    return MailgunProvider(HttpSettings(api_key="test-mailgun-key", base_url=fake.url,
                                        domain="mg.example.org", read_timeout=kw.get("read_timeout", 5)))


def _ses(fake: FakeSES, **kw) -> SesProvider:
    return SesProvider(SesSettings(region="us-east-1", access_key_id="test", secret_access_key="test",
                                   endpoint_url=fake.url, read_timeout=kw.get("read_timeout", 5)))


# -- SendGrid ----------------------------------------------------------------------------------
def test_sendgrid_sends_1500_personalised_messages_in_two_calls(sendgrid):
    emails = _emails(1500)
    results = _sg(sendgrid).send_batch(emails)
    assert {r.outcome for r in results} == {Outcome.ACCEPTED}
    assert len(sendgrid.received()) == 2
    _assert_exactly_once(sendgrid.ledger, emails)
    body = sendgrid.received()[0].json()
    first = body["personalizations"][0]
    assert first["subject"] == "Hello 0" and first["custom_args"] == {"notifier_message_id": "1"}
    assert first["substitutions"]["-notifier_html_part-"] == "<p>html 0</p>"
    assert first["headers"] == {"List-Unsubscribe": "<https://u.example/0>"}
    assert results[0].provider_message_id


def test_sendgrid_shared_content_needs_no_substitutions(sendgrid):
    _sg(sendgrid).send_batch(_emails(3, same=True))
    body = sendgrid.received()[0].json()
    assert body["content"][1]["value"] == "<p>html</p>"
    assert "substitutions" not in body["personalizations"][0]


def test_sendgrid_same_address_twice_goes_in_two_requests(sendgrid):
    emails = _emails(2)
    twin = OutgoingEmail(99, emails[0].recipient, "notifier@example.org", "s", "t", "<p>h</p>")
    results = _sg(sendgrid).send_batch([*emails, twin])
    assert [r.outcome for r in results] == [Outcome.ACCEPTED] * 3
    assert len(sendgrid.received()) == 2


def test_sendgrid_rejected_address_fails_alone_rest_resent(sendgrid):
    emails = _emails(5)
    sendgrid.faults.reject_permanent(emails[2].recipient)
    results = _sg(sendgrid).send_batch(emails)
    assert [r.outcome for r in results].count(Outcome.PERMANENT) == 1
    assert results[2].outcome is Outcome.PERMANENT and results[2].response_code == "400"
    _assert_exactly_once(sendgrid.ledger, [e for i, e in enumerate(emails) if i != 2])


@pytest.mark.parametrize(("fault", "outcome"), [
    (lambda f: f.error_5xx(503), Outcome.TRANSIENT),
    (lambda f: f.rate_limit(7), Outcome.TRANSIENT),
])
def test_sendgrid_errors_are_transient(sendgrid, fault, outcome):
    fault(sendgrid.faults)
    results = _sg(sendgrid).send_batch(_emails(2))
    assert {r.outcome for r in results} == {outcome}
    assert sendgrid.ledger.count() == 0


def test_sendgrid_429_carries_retry_after(sendgrid):
    sendgrid.faults.rate_limit(7)
    result = _sg(sendgrid).send_batch(_emails(1))[0]
    assert (result.response_code, result.retry_after_seconds) == ("429", 7.0)


def test_sendgrid_refused_connection_is_transient():
    with FakeSendGrid() as fake:
        url = fake.url
    result = SendGridProvider(HttpSettings(api_key="k", base_url=url)).send_batch(_emails(1))[0]
    assert result.outcome is Outcome.TRANSIENT


def test_sendgrid_accept_then_hang_is_ambiguous(sendgrid):
    sendgrid.faults.accept_then_hang(hang_seconds=2)
    result = _sg(sendgrid, read_timeout=0.5).send_batch(_emails(1))[0]
    assert result.outcome is Outcome.AMBIGUOUS
    assert sendgrid.ledger.count() == 1  # it did land: exactly why it must not go elsewhere


def test_sendgrid_bad_key_is_transient_so_the_next_esp_can_take_it(sendgrid):
    provider = SendGridProvider(HttpSettings(api_key="wrong", base_url=sendgrid.url))
    assert provider.send_batch(_emails(1))[0].outcome is Outcome.TRANSIENT


# -- Mailgun -----------------------------------------------------------------------------------
def test_mailgun_batch_uses_recipient_variables(mailgun):
    emails = _emails(1200)
    results = _mg(mailgun).send_batch(emails)
    assert {r.outcome for r in results} == {Outcome.ACCEPTED}
    assert len(mailgun.received()) == 2
    _assert_exactly_once(mailgun.ledger, emails)
    form = parse_form(mailgun.received()[0])
    assert form["subject"] == ["%recipient.subject%"]
    assert form["v:notifier_message_id"] == ["%recipient.notifier_message_id%"]
    variables = json.loads(form["recipient-variables"][0])
    assert variables["user0@example.com"]["html"] == "<p>html 0</p>"
    assert form["h:List-Unsubscribe"] == ["%recipient.h_0%"]
    assert not results[0].provider_message_id.startswith("<")


def test_mailgun_shared_content_sent_literally(mailgun):
    _mg(mailgun).send_batch(_emails(3, same=True))
    form = parse_form(mailgun.received()[0])
    assert form["html"] == ["<p>html</p>"]


def test_mailgun_rejected_address_is_isolated_by_splitting(mailgun):
    emails = _emails(16)
    mailgun.faults.reject_permanent(emails[5].recipient)
    results = _mg(mailgun).send_batch(emails)
    assert [i for i, r in enumerate(results) if r.outcome is Outcome.PERMANENT] == [5]
    _assert_exactly_once(mailgun.ledger, [e for i, e in enumerate(emails) if i != 5])
    assert len(mailgun.received()) <= 2 * 4 + 1


def test_mailgun_5xx_transient_and_hang_ambiguous(mailgun):
    mailgun.faults.error_5xx(502, next_n=1)
    assert _mg(mailgun).send_batch(_emails(1))[0].outcome is Outcome.TRANSIENT
    mailgun.faults.accept_then_hang(hang_seconds=2, next_n=1)
    assert _mg(mailgun, read_timeout=0.5).send_batch(_emails(1))[0].outcome is Outcome.AMBIGUOUS


# -- SES ---------------------------------------------------------------------------------------
def test_ses_personalised_messages_use_send_email_with_tag(ses):
    emails = _emails(30)
    results = _ses(ses).send_batch(emails)
    assert {r.outcome for r in results} == {Outcome.ACCEPTED}
    assert [r.message_id for r in results] == [e.message_id for e in emails]  # order kept
    paths = {r.path for r in ses.received()}
    assert paths == {"/v2/email/outbound-emails"}
    _assert_exactly_once(ses.ledger, emails)
    body = next(r.json() for r in ses.received() if r.json()["Destination"]["ToAddresses"] == [
        "user0@example.com"])
    assert body["EmailTags"] == [{"Name": "notifier_message_id", "Value": "1"}]
    assert body["Content"]["Simple"]["Headers"][0]["Name"] == "List-Unsubscribe"


def test_ses_broadcast_uses_bulk_in_chunks_of_50(ses):
    emails = _emails(120, same=True)
    results = _ses(ses).send_batch(emails)
    assert {r.outcome for r in results} == {Outcome.ACCEPTED}
    assert [r.path for r in ses.received()] == ["/v2/email/outbound-bulk-emails"] * 3
    _assert_exactly_once(ses.ledger, emails)


def test_ses_bulk_entry_rejection_is_per_message(ses):
    emails = _emails(4, same=True)
    ses.faults.reject_permanent(emails[1].recipient)
    results = _ses(ses).send_batch(emails)
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.PERMANENT,
                                           Outcome.ACCEPTED, Outcome.ACCEPTED]


def test_ses_errors_classified(ses):
    emails = _emails(1)
    ses.faults.reject_permanent(emails[0].recipient)
    assert _ses(ses).send_batch(emails)[0].outcome is Outcome.PERMANENT
    ses.faults.clear_rejections()
    ses.faults.rate_limit(3, next_n=1)
    throttled = _ses(ses).send_batch(emails)[0]
    assert (throttled.outcome, throttled.response_code, throttled.retry_after_seconds) == (
        Outcome.TRANSIENT, "429", 3.0)
    ses.faults.error_5xx(500, next_n=1)
    assert _ses(ses).send_batch(emails)[0].outcome is Outcome.TRANSIENT
    assert ses.ledger.count() == 0


def test_ses_hang_is_ambiguous_and_botocore_does_not_retry(ses):
    ses.faults.accept_then_hang(hang_seconds=2, next_n=1)
    result = _ses(ses, read_timeout=0.5).send_batch(_emails(1))[0]
    assert result.outcome is Outcome.AMBIGUOUS
    assert len(ses.received()) == 1


def test_ses_refused_is_transient():
    with FakeSES() as fake:
        url = fake.url
    provider = SesProvider(SesSettings(region="us-east-1", access_key_id="t", secret_access_key="t",
                                       endpoint_url=url, connect_timeout=1))
    assert provider.send_batch(_emails(1))[0].outcome is Outcome.TRANSIENT
