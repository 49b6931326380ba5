"""Each fake proven against a real client: requests and boto3 sesv2.

They need no database or Redis (``DATABASE_URL=postgres://127.0.0.1:1/none pytest -q
tests/testkit`` passes). Every test is bounded by short client timeouts and short fault windows.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from testkit.fakes import (
    FakeMailgun,
    FakeSendGrid,
    FakeSES,
    FaultPlan,
    Ledger,
    Mode,
    Outcome,
)

pytestmark = pytest.mark.filterwarnings("ignore:Session.login_data is deprecated")

SG_AUTH = {"Authorization": "Bearer test-sendgrid-key"}
MG_AUTH = ("api", "test-mailgun-key")
TIMEOUT = 2.0


# -- fixtures & helpers ----------------------------------------------------------------
@pytest.fixture
def sendgrid() -> Iterator[FakeSendGrid]:
    with FakeSendGrid() as fake:
        yield fake


@pytest.fixture
def mailgun() -> Iterator[FakeMailgun]:
    with FakeMailgun() as fake:
        yield fake


@pytest.fixture
def ses() -> Iterator[FakeSES]:
    with FakeSES() as fake:
        yield fake


def sg_body(*msg_ids: str, top: str | None = None) -> dict[str, Any]:
    """A valid SendGrid body, one personalization per message id."""
    body: dict[str, Any] = {
        "personalizations": [
            {"to": [{"email": f"user{i}@example.com"}],
             "custom_args": {"notifier_message_id": mid}, "substitutions": {"-n-": "x"}}
            for i, mid in enumerate(msg_ids)
        ],
        "from": {"email": "noreply@example.com"},
        "subject": "Hello",
        "content": [{"type": "text/plain", "value": "Hi -n-"}],
    }
    if top is not None:
        body["custom_args"] = {"notifier_message_id": top}
    return body


def sg_post(fake: FakeSendGrid, body: Any, **kwargs: Any) -> requests.Response:
    kwargs.setdefault("timeout", TIMEOUT)
    kwargs.setdefault("headers", SG_AUTH)
    return requests.post(f"{fake.url}/v3/mail/send", json=body, **kwargs)


def mg_post(fake: FakeMailgun, data: Any, **kwargs: Any) -> requests.Response:
    kwargs.setdefault("timeout", TIMEOUT)
    kwargs.setdefault("auth", MG_AUTH)
    return requests.post(f"{fake.url}/v3/mg.example.com/messages", data=data, **kwargs)


def ses_client(fake: FakeSES, read_timeout: float = TIMEOUT) -> Any:
    boto3 = pytest.importorskip("boto3")
    from botocore.config import Config

    # total_max_attempts=1: no botocore retries, so the fault is seen by the test.
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"},
                    connect_timeout=1, read_timeout=read_timeout)
    return boto3.client("sesv2", endpoint_url=fake.url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=config)


def ses_simple(client: Any, to: str, mid: str) -> dict[str, Any]:
    return client.send_email(
        FromEmailAddress="noreply@example.com",
        Destination={"ToAddresses": [to]},
        Content={"Simple": {"Subject": {"Data": "Hi"}, "Body": {"Text": {"Data": "Body"}}}},
        EmailTags=[{"Name": "notifier_message_id", "Value": mid}],
    )


def eml(mid: str, to: str = "a@example.com") -> str:
    return (f"From: noreply@example.com\r\nTo: {to}\r\nSubject: Hi\r\n"
            f"X-Notifier-Message-Id: {mid}\r\n\r\nHello\r\n")


def assert_refused(port: int) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# -- ledger & fault plan ------------------------------------------------------------------
def test_ledger_groups_duplicates_and_resets() -> None:
    ledger = Ledger()
    ledger.record("ses", "m1", "a@x.com", "p1")
    ledger.record("sendgrid", "m1", "a@x.com", "p2")
    ledger.record("ses", "m2", "b@x.com", "p3")
    ledger.count_request(Outcome.ACCEPTED)
    assert ledger.count() == 3
    assert [e.provider for e in ledger.by_message_id()["m1"]] == ["ses", "sendgrid"]
    assert list(ledger.duplicates()) == ["m1"]
    assert ledger.outcomes() == {"accepted": 1}
    ledger.reset()
    assert ledger.count() == 0 and ledger.requests() == 0


def test_fault_next_n_then_ok() -> None:
    plan = FaultPlan()
    plan.error_5xx(502, next_n=2)
    assert [plan.decide().mode for _ in range(3)] == [Mode.ERROR_5XX, Mode.ERROR_5XX, Mode.OK]


def test_fault_window_ends_at_deadline() -> None:
    now = [100.0]
    plan = FaultPlan(clock=lambda: now[0])
    plan.rate_limit(7, for_seconds=5)
    assert plan.decide().retry_after == 7
    now[0] = 105.0
    assert plan.decide().mode is Mode.OK


def test_probability_is_reproducible_with_seed() -> None:
    def run() -> list[Mode]:
        plan = FaultPlan(seed=42)
        plan.accept_then_hang(1.0, probability=0.3)
        return [plan.decide().mode for _ in range(200)]

    first = run()
    assert first == run()
    assert 30 < first.count(Mode.ACCEPT_THEN_HANG) < 90


def test_refuse_cannot_be_counted() -> None:
    with pytest.raises(ValueError):
        FaultPlan().set(Mode.REFUSE, next_n=1)


# -- SendGrid -----------------------------------------------------------------------------
def test_sendgrid_accepts_and_records_per_personalization(sendgrid: FakeSendGrid) -> None:
    body = sg_body("m1", "m2")
    body["personalizations"].append({"to": [{"email": "top@example.com"}]})
    body["custom_args"] = {"notifier_message_id": "m-top"}
    resp = sg_post(sendgrid, body)
    assert resp.status_code == 202 and resp.text == ""
    x_id = resp.headers["X-Message-Id"]
    got = {e.recipient: (e.message_id, e.provider_message_id) for e in sendgrid.ledger.entries()}
    assert got == {"user0@example.com": ("m1", x_id), "user1@example.com": ("m2", x_id),
                   "top@example.com": ("m-top", x_id)}


def test_sendgrid_and_mailgun_refuse_bodies_over_their_documented_limit(
    sendgrid: FakeSendGrid, mailgun: FakeMailgun
) -> None:
    filler = "x" * 30_000_000  # over SendGrid's 30 MB and Mailgun's 25 MB
    body = sg_body("m1")
    body["personalizations"][0]["substitutions"] = {"-n-": filler}
    resp = sg_post(sendgrid, body, timeout=20)
    assert resp.status_code == 413 and resp.json()["errors"][0]["message"]
    assert sg_post(sendgrid, sg_body("m2")).status_code == 202  # the limit is the body's, not ours
    sizes = sendgrid.request_sizes()
    assert sizes[0] > 30_000_000 and len(sizes) == 2
    resp = mg_post(mailgun, {"from": "a@example.com", "to": "b@example.com", "text": filler}, timeout=20)
    assert resp.status_code == 413 and mailgun.request_sizes()[0] > 25_000_000
    assert sendgrid.ledger.count() == 1 and mailgun.ledger.count() == 0


def test_sendgrid_rejects_bad_key(sendgrid: FakeSendGrid) -> None:
    resp = sg_post(sendgrid, sg_body("m1"), headers={"Authorization": "Bearer nope"})
    assert resp.status_code == 401
    assert resp.json()["errors"][0]["help"] is None
    assert sendgrid.ledger.count() == 0


def test_sendgrid_malformed_body_gets_error_shape(sendgrid: FakeSendGrid) -> None:
    body = sg_body("m1")
    body["personalizations"][0]["to"] = [{"email": "not-an-address"}]
    body["personalizations"][0]["custom_args"] = {"notifier_message_id": 5}
    del body["content"]
    resp = sg_post(sendgrid, body)
    assert resp.status_code == 400
    fields = {e["field"] for e in resp.json()["errors"]}
    assert fields == {"personalizations.0.to.0.email", "personalizations.0.custom_args",
                      "content"}
    assert all(set(e) == {"message", "field", "help"} for e in resp.json()["errors"])
    not_json = requests.post(f"{sendgrid.url}/v3/mail/send", data=b"{", headers=SG_AUTH,
                             timeout=TIMEOUT)
    assert not_json.status_code == 400


def test_sendgrid_limits_personalizations(sendgrid: FakeSendGrid) -> None:
    resp = sg_post(sendgrid, sg_body(*[f"m{i}" for i in range(1001)]))
    assert resp.status_code == 400
    assert resp.json()["errors"][0]["field"] == "personalizations"


def test_sendgrid_permanent_reject(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.reject_permanent("USER1@example.com")
    resp = sg_post(sendgrid, sg_body("m1", "m2"))
    assert resp.status_code == 400
    assert resp.json()["errors"][0]["field"] == "personalizations.1.to.0.email"
    assert sendgrid.ledger.count() == 0
    assert sendgrid.ledger.outcomes() == {Outcome.REJECTED: 1}


def test_sendgrid_5xx_for_next_n_then_ok(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.error_5xx(502, next_n=1)
    first, second = sg_post(sendgrid, sg_body("m1")), sg_post(sendgrid, sg_body("m1"))
    assert first.status_code == 502 and "errors" in first.json()
    assert second.status_code == 202
    assert len(sendgrid.ledger.by_message_id()["m1"]) == 1


def test_sendgrid_429_carries_retry_after(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.rate_limit(retry_after=30)
    resp = sg_post(sendgrid, sg_body("m1"))
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "30"
    assert sendgrid.ledger.outcomes() == {Outcome.RATE_LIMITED: 1}


def test_sendgrid_latency(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.slow(0.3, next_n=1)
    started = time.monotonic()
    assert sg_post(sendgrid, sg_body("m1")).status_code == 202
    assert time.monotonic() - started >= 0.3


def test_sendgrid_accept_then_hang(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.accept_then_hang(hang_seconds=2.0, next_n=1)
    with pytest.raises(requests.ReadTimeout):
        sg_post(sendgrid, sg_body("m1"), timeout=0.3)
    assert [e.message_id for e in sendgrid.ledger.entries()] == ["m1"]
    # A retry by the client is now visible as a duplicate.
    assert sg_post(sendgrid, sg_body("m1")).status_code == 202
    assert list(sendgrid.ledger.duplicates()) == ["m1"]


def test_sendgrid_refuse_then_reopen_on_same_port(sendgrid: FakeSendGrid) -> None:
    port = sendgrid.port
    sendgrid.faults.refuse()
    assert_refused(port)
    with pytest.raises(requests.ConnectionError):
        sg_post(sendgrid, sg_body("m1"))
    sendgrid.faults.ok()
    assert sendgrid.port == port
    assert sg_post(sendgrid, sg_body("m1")).status_code == 202


def test_refuse_drops_kept_alive_connections(sendgrid: FakeSendGrid) -> None:
    with requests.Session() as session:
        session.headers.update(SG_AUTH)
        url = f"{sendgrid.url}/v3/mail/send"
        assert session.post(url, json=sg_body("m1"), timeout=TIMEOUT).status_code == 202
        sendgrid.faults.refuse()
        with pytest.raises(requests.ConnectionError):
            session.post(url, json=sg_body("m2"), timeout=TIMEOUT)
    assert sendgrid.ledger.count() == 1


def test_record_requests_keeps_wire_payloads() -> None:
    with FakeSendGrid(record_requests=True) as fake:
        sg_post(fake, sg_body("m1"))
        [request] = fake.received()
    assert request.path == "/v3/mail/send"
    assert request.json()["personalizations"][0]["substitutions"] == {"-n-": "x"}


def test_request_log_stamps_each_answer_with_its_retry_after() -> None:
    with FakeSendGrid(record_requests=True) as fake:
        fake.faults.rate_limit(retry_after=7, next_n=1)
        before = time.time()
        sg_post(fake, sg_body("m1"))
        sg_post(fake, sg_body("m2"))
        throttled, accepted = fake.request_log()
    assert (throttled.outcome, throttled.retry_after) == (Outcome.RATE_LIMITED, 7)
    assert (accepted.outcome, accepted.retry_after) == (Outcome.ACCEPTED, None)
    assert before <= throttled.arrived_at <= throttled.answered_at <= accepted.arrived_at
    with FakeSendGrid() as quiet:  # not recording: nothing kept (benchmarks send millions)
        sg_post(quiet, sg_body("m1"))
        assert quiet.request_log() == []


def test_windowed_refuse_ends_by_itself(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.refuse(for_seconds=0.3)
    assert_refused(sendgrid.port)
    time.sleep(0.45)
    assert sg_post(sendgrid, sg_body("m1")).status_code == 202


def test_windowed_5xx_ends(sendgrid: FakeSendGrid) -> None:
    sendgrid.faults.error_5xx(503, for_seconds=0.2)
    assert sg_post(sendgrid, sg_body("m1")).status_code == 503
    time.sleep(0.25)
    assert sg_post(sendgrid, sg_body("m1")).status_code == 202


def test_unknown_route_is_404(sendgrid: FakeSendGrid) -> None:
    assert requests.get(f"{sendgrid.url}/v3/nope", timeout=TIMEOUT).status_code == 404


# -- Mailgun ------------------------------------------------------------------------------
def test_mailgun_batch_with_recipient_variables(mailgun: FakeMailgun) -> None:
    data = {
        "from": "Notifier <noreply@mg.example.com>",
        "to": ["a@example.com", "B <b@example.com>"],
        "subject": "Hi %recipient.name%", "text": "Hello", "html": "<p>Hello</p>",
        "recipient-variables": json.dumps({"a@example.com": {"mid": "m1", "name": "A"},
                                           "b@example.com": {"mid": "m2", "name": "B"}}),
        "v:notifier_message_id": "%recipient.mid%",
        "h:Reply-To": "support@example.com",
    }
    resp = mg_post(mailgun, data)
    assert resp.status_code == 200
    body = resp.json()
    assert body["message"] == "Queued. Thank you."
    assert body["id"].startswith("<") and body["id"].endswith("@mg.example.com>")
    got = {e.recipient: e.message_id for e in mailgun.ledger.entries()}
    assert got == {"a@example.com": "m1", "b@example.com": "m2"}


def test_mailgun_cc_bcc_and_header_id(mailgun: FakeMailgun) -> None:
    data = {"from": "n@mg.example.com", "to": "a@example.com, b@example.com",
            "cc": "c@example.com", "bcc": "d@example.com", "text": "T",
            "h:X-Notifier-Message-Id": "m7"}
    assert mg_post(mailgun, data).status_code == 200
    assert {e.recipient for e in mailgun.ledger.by_message_id()["m7"]} == {
        "a@example.com", "b@example.com", "c@example.com", "d@example.com"}


def test_mailgun_multipart(mailgun: FakeMailgun) -> None:
    data = {"from": "noreply@mg.example.com", "to": "c@example.com", "subject": "S",
            "text": "T", "v:notifier_message_id": "m3"}
    files = {"attachment": ("a.txt", b"attached")}
    assert mg_post(mailgun, data, files=files).status_code == 200
    assert [(e.recipient, e.message_id) for e in mailgun.ledger.entries()] == [
        ("c@example.com", "m3")]


def test_mailgun_auth_validation_and_limits(mailgun: FakeMailgun) -> None:
    ok = {"from": "n@mg.example.com", "to": "a@example.com", "text": "T"}
    bad_auth = mg_post(mailgun, ok, auth=("api", "wrong"))
    assert bad_auth.status_code == 401 and bad_auth.text == "Forbidden"
    assert mg_post(mailgun, {"from": "n@mg.example.com", "text": "T"}).status_code == 400
    many = dict(ok, to=[f"u{i}@example.com" for i in range(1001)])
    assert mg_post(mailgun, many).status_code == 400
    assert mailgun.ledger.count() == 0


def test_mailgun_reject_and_5xx(mailgun: FakeMailgun) -> None:
    mailgun.faults.reject_permanent("bad@example.com")
    data = {"from": "n@mg.example.com", "to": ["a@example.com", "bad@example.com"],
            "text": "T"}
    resp = mg_post(mailgun, data)
    assert resp.status_code == 400 and "bad@example.com" in resp.json()["message"]
    mailgun.faults.error_5xx(500, next_n=1)
    assert mg_post(mailgun, data).status_code == 500


# -- SES v2 -------------------------------------------------------------------------------
def test_ses_send_email_simple_and_raw(ses: FakeSES) -> None:
    client = ses_client(ses)
    first = ses_simple(client, "a@example.com", "m1")["MessageId"]
    raw = eml("m2", to="b@example.com").encode()
    second = client.send_email(Content={"Raw": {"Data": raw}})["MessageId"]
    got = {e.recipient: (e.message_id, e.provider_message_id) for e in ses.ledger.entries()}
    assert got == {"a@example.com": ("m1", first), "b@example.com": ("m2", second)}


def test_ses_bulk_with_partial_rejection(ses: FakeSES) -> None:
    ses.faults.reject_permanent("bad@example.com")
    entries = [
        {"Destination": {"ToAddresses": [to]},
         "ReplacementTags": [{"Name": "notifier_message_id", "Value": mid}],
         "ReplacementEmailContent": {"ReplacementTemplate": {"ReplacementTemplateData": "{}"}}}
        for to, mid in [("a@example.com", "m1"), ("bad@example.com", "m2")]
    ]
    resp = ses_client(ses).send_bulk_email(
        FromEmailAddress="noreply@example.com",
        DefaultContent={"Template": {"TemplateName": "welcome", "TemplateData": "{}"}},
        BulkEmailEntries=entries)
    statuses = [r["Status"] for r in resp["BulkEmailEntryResults"]]
    assert statuses == ["SUCCESS", "MESSAGE_REJECTED"]
    assert [e.message_id for e in ses.ledger.entries()] == ["m1"]
    assert ses.ledger.outcomes() == {Outcome.PARTIAL: 1}


def test_ses_missing_auth_is_403(ses: FakeSES) -> None:
    resp = requests.post(f"{ses.url}/v2/email/outbound-emails", json={}, timeout=TIMEOUT)
    assert resp.status_code == 403
    assert resp.headers["x-amzn-ErrorType"] == resp.json()["__type"]


def test_ses_errors_map_to_boto3_exceptions(ses: FakeSES) -> None:
    client = ses_client(ses)
    ses.faults.rate_limit(retry_after=2, next_n=1)
    with pytest.raises(client.exceptions.TooManyRequestsException) as throttled:
        ses_simple(client, "a@example.com", "m1")
    assert throttled.value.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == "2"
    ses.faults.error_5xx(503, next_n=1)
    with pytest.raises(client.exceptions.ClientError) as failed:
        ses_simple(client, "a@example.com", "m1")
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    with pytest.raises(client.exceptions.BadRequestException):
        ses_simple(client, "a@example.com", "bad tag value!")
    ses.faults.reject_permanent("a@example.com")
    with pytest.raises(client.exceptions.MessageRejected):
        ses_simple(client, "a@example.com", "m1")
    assert ses.ledger.count() == 0


def test_ses_accept_then_hang(ses: FakeSES) -> None:
    from botocore.exceptions import ReadTimeoutError

    ses.faults.accept_then_hang(hang_seconds=2.0, next_n=1)
    with pytest.raises(ReadTimeoutError):
        ses_simple(ses_client(ses, read_timeout=0.3), "a@example.com", "m1")
    assert [e.message_id for e in ses.ledger.entries()] == ["m1"]


# -- shared plan / ledger -----------------------------------------------------------------
def test_shared_plan_and_ledger_across_servers() -> None:
    plan, ledger = FaultPlan(), Ledger()
    with FakeSendGrid(faults=plan, ledger=ledger) as sg, FakeMailgun(faults=plan, ledger=ledger) as mg:
        plan.refuse()
        assert_refused(sg.port)
        assert_refused(mg.port)
        plan.ok()
        assert sg_post(sg, sg_body("m1")).status_code == 202
        data = {"from": "n@mg.example.com", "to": "a@example.com", "subject": "Hi", "text": "Hello",
                "v:notifier_message_id": "m1"}
        assert mg_post(mg, data).status_code == 200
    assert sorted(e.provider for e in ledger.by_message_id()["m1"]) == ["mailgun", "sendgrid"]
