"""Verifier tests: real signatures made with throwaway keys, no network, no Django."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Self

import pytest

from delivery.providers.mailgun.signature import MailgunVerifier
from delivery.providers.sendgrid.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, SendGridVerifier
from delivery.providers.ses.sns import SnsVerifier, sns_string_to_sign
from delivery.providers.ses.sns_certs import (
    HttpsCertificateStore,
    StaticCertificateStore,
    validate_signing_cert_url,
)
from delivery.providers.webhooks import WebhookVerificationError
from delivery.providers.webhooks.replay import InMemoryReplayGuard, RedisReplayGuard
from testkit.webhook_signing import (
    TEST_TOPIC_ARN,
    SendGridTestSigner,
    SnsTestSigner,
    mailgun_body,
)

NOW = 1_700_000_000.0


def fixed_clock() -> float:
    return NOW


def reason_of(excinfo: pytest.ExceptionInfo[WebhookVerificationError]) -> str:
    return excinfo.value.reason


# --------------------------------------------------------------------------- SNS


@pytest.fixture(scope="module")
def sns_signer() -> SnsTestSigner:
    return SnsTestSigner.generate()


@pytest.fixture
def store(sns_signer: SnsTestSigner) -> StaticCertificateStore:
    return sns_signer.certificate_store()


@pytest.fixture
def sns_verifier(store: StaticCertificateStore) -> SnsVerifier:
    return SnsVerifier(allowed_topic_arns=[TEST_TOPIC_ARN], certificate_store=store)


def sns_body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def test_string_to_sign_matches_aws_documented_example() -> None:
    # Example string to sign from the AWS SNS guide, "Verifying the signatures of
    # Amazon SNS messages" (Notification with Subject).
    message = {
        "Type": "Notification",
        "MessageId": "4d4dc071-ddbf-465d-bba8-08f81c89da64",
        "Subject": "My subject",
        "Message": "My Test Message",
        "Timestamp": "2019-01-31T04:37:04.321Z",
        "TopicArn": "arn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P",
        "UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe",
    }
    expected = (
        "Message\nMy Test Message\n"
        "MessageId\n4d4dc071-ddbf-465d-bba8-08f81c89da64\n"
        "Subject\nMy subject\n"
        "Timestamp\n2019-01-31T04:37:04.321Z\n"
        "TopicArn\narn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P\n"
        "Type\nNotification\n"
    )
    assert sns_string_to_sign(message) == expected.encode()
    del message["Subject"]
    assert b"Subject" not in sns_string_to_sign(message)


def test_string_to_sign_for_subscription_confirmation_order() -> None:
    message = {
        "Type": "SubscriptionConfirmation", "MessageId": "m", "Token": "t",
        "TopicArn": "arn", "Message": "msg", "SubscribeURL": "https://s",
        "Timestamp": "2019-01-31T19:25:13.719Z",
    }
    expected = (
        "Message\nmsg\nMessageId\nm\nSubscribeURL\nhttps://s\n"
        "Timestamp\n2019-01-31T19:25:13.719Z\nToken\nt\nTopicArn\narn\n"
        "Type\nSubscriptionConfirmation\n"
    )
    assert sns_string_to_sign(message) == expected.encode()


@pytest.mark.parametrize("version", ["1", "2"])
def test_sns_valid_notification(
    sns_signer: SnsTestSigner, sns_verifier: SnsVerifier, version: str
) -> None:
    message = sns_signer.notification(
        {"eventType": "Delivery"}, subject="multi\nline", version=version
    )
    assert sns_verifier.verify(sns_body(message)) == message


@pytest.mark.parametrize("version", ["1", "2"])
def test_sns_valid_subscription_confirmation(
    sns_signer: SnsTestSigner, sns_verifier: SnsVerifier, version: str
) -> None:
    message = sns_signer.subscription_confirmation(version=version)
    assert sns_verifier.verify(sns_body(message))["Token"] == message["Token"]


def test_sns_unsubscribe_confirmation(
    sns_signer: SnsTestSigner, sns_verifier: SnsVerifier
) -> None:
    message = sns_signer.subscription_confirmation()
    message = sns_signer.sign({**message, "Type": "UnsubscribeConfirmation"})
    assert sns_verifier.verify(sns_body(message))["Type"] == "UnsubscribeConfirmation"


def test_sns_tampered_body(sns_signer: SnsTestSigner, sns_verifier: SnsVerifier) -> None:
    message = sns_signer.notification({"eventType": "Bounce"})
    message["Message"] = json.dumps({"eventType": "Delivery"})
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(message))
    assert reason_of(exc) == "bad_signature"


def test_sns_signature_version_swap_is_rejected(
    sns_signer: SnsTestSigner, sns_verifier: SnsVerifier
) -> None:
    message = sns_signer.notification("hello", version="1")
    message["SignatureVersion"] = "2"
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(message))
    assert reason_of(exc) == "bad_signature"


def test_sns_forged_signature_from_other_key(sns_verifier: SnsVerifier) -> None:
    # Signed by a key whose certificate is not the one served at SigningCertURL.
    forger = SnsTestSigner.generate()
    message = forger.notification("hello", version="2")
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(message))
    assert reason_of(exc) == "bad_signature"


def test_sns_garbage_signature(sns_signer: SnsTestSigner, sns_verifier: SnsVerifier) -> None:
    message = sns_signer.notification("hello")
    message["Signature"] = base64.b64encode(b"\x00" * 256).decode()
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(message))
    assert reason_of(exc) == "bad_signature"


def test_sns_foreign_topic_rejected_before_fetch(
    sns_signer: SnsTestSigner, sns_verifier: SnsVerifier, store: StaticCertificateStore
) -> None:
    message = sns_signer.notification("hello", topic_arn="arn:aws:sns:us-east-1:999:evil")
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(message))
    assert reason_of(exc) == "topic_not_allowed"
    assert store.requested == []


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.com/SimpleNotificationService-x.pem",
        "https://sns.us-east-1.amazonaws.com.evil.io/cert.pem",
        "https://evilsns.us-east-1.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com@evil.io/cert.pem",
        "https://user@sns.us-east-1.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com:8443/cert.pem",
        "https://s3.amazonaws.com/cert.pem",
        "https://127.0.0.1/cert.pem",
    ],
)
def test_sns_non_aws_cert_host_never_fetched(
    sns_signer: SnsTestSigner, store: StaticCertificateStore, url: str
) -> None:
    store.add(url, sns_signer.certificate_pem)  # even a "known" cert must not be used
    verifier = SnsVerifier(allowed_topic_arns=[TEST_TOPIC_ARN], certificate_store=store)
    evil = SnsTestSigner(sns_signer.private_key, sns_signer.certificate_pem, url)
    with pytest.raises(WebhookVerificationError) as exc:
        verifier.verify(sns_body(evil.notification("hello")))
    assert reason_of(exc) == "cert_host_not_allowed"
    assert store.requested == []


def test_sns_http_cert_url_rejected(
    sns_signer: SnsTestSigner, store: StaticCertificateStore, sns_verifier: SnsVerifier
) -> None:
    url = sns_signer.cert_url.replace("https://", "http://")
    evil = SnsTestSigner(sns_signer.private_key, sns_signer.certificate_pem, url)
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(evil.notification("hello")))
    assert reason_of(exc) == "cert_url_not_https"
    assert store.requested == []


def test_sns_cert_path_must_be_pem(sns_signer: SnsTestSigner, sns_verifier: SnsVerifier) -> None:
    evil = SnsTestSigner(
        sns_signer.private_key, sns_signer.certificate_pem,
        "https://sns.us-east-1.amazonaws.com/?Action=Foo",
    )
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(evil.notification("hello")))
    assert reason_of(exc) == "cert_path_not_allowed"


@pytest.mark.parametrize(
    "url",
    [
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem",
        "https://sns.eu-central-1.amazonaws.com/SimpleNotificationService-abc.pem",
        "https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-abc.pem",
        "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-abc.pem",
        "https://SNS.US-EAST-1.AMAZONAWS.COM/SimpleNotificationService-abc.pem",
    ],
)
def test_documented_sns_cert_hosts_accepted(url: str) -> None:
    validate_signing_cert_url(url)


def test_sns_stale_timestamp_rejected_before_fetch(
    sns_signer: SnsTestSigner, store: StaticCertificateStore
) -> None:
    verifier = SnsVerifier(
        allowed_topic_arns=[TEST_TOPIC_ARN], certificate_store=store,
        max_age=timedelta(hours=1), clock=fixed_clock,
    )
    sent = datetime.fromtimestamp(NOW, UTC) - timedelta(hours=2)
    message = sns_signer.notification("hello", timestamp=sent)
    with pytest.raises(WebhookVerificationError) as exc:
        verifier.verify(sns_body(message))
    assert reason_of(exc) == "stale_timestamp"
    assert store.requested == []
    fresh = sns_signer.notification("hello", timestamp=sent + timedelta(minutes=90))
    assert verifier.verify(sns_body(fresh))["Message"] == "hello"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda m: m.update(Type="Bogus"), "unsupported_message_type"),
        (lambda m: m.update(SignatureVersion="3"), "unsupported_signature_version"),
        (lambda m: m.pop("MessageId"), "missing_field"),
        (lambda m: m.pop("SigningCertURL"), "missing_field"),
        (lambda m: m.update(Timestamp="yesterday"), "bad_timestamp"),
        (lambda m: m.update(Signature="not base64!"), "bad_signature"),
    ],
)
def test_sns_malformed_messages(
    sns_signer: SnsTestSigner, sns_verifier: SnsVerifier, mutate: Any, reason: str
) -> None:
    message = sns_signer.notification("hello")
    mutate(message)
    with pytest.raises(WebhookVerificationError) as exc:
        sns_verifier.verify(sns_body(message))
    assert reason_of(exc) == reason


def test_sns_non_json_body(sns_verifier: SnsVerifier) -> None:
    for body in (b"not json", b"[1, 2]"):
        with pytest.raises(WebhookVerificationError) as exc:
            sns_verifier.verify(body)
        assert reason_of(exc) == "malformed_payload"


class FakeResponse:
    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self._body = body

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def iter_content(self, chunk_size: int) -> Any:
        for i in range(0, len(self._body), chunk_size):
            yield self._body[i : i + chunk_size]


class FakeSession:
    def __init__(self, body: bytes, status: int = 200) -> None:
        self.body, self.status = body, status
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get(self, url: str, **kwargs: Any) -> FakeResponse:
        self.calls.append((url, kwargs))
        return FakeResponse(self.status, self.body)


def test_https_store_caches_and_does_not_follow_redirects(sns_signer: SnsTestSigner) -> None:
    ticks = iter([0.0, 10.0, 4000.0])
    session = FakeSession(sns_signer.certificate_pem)
    store = HttpsCertificateStore(session=session, ttl=3600, monotonic=lambda: next(ticks))
    assert store.get(sns_signer.cert_url) == sns_signer.certificate_pem
    assert store.get(sns_signer.cert_url) == sns_signer.certificate_pem
    assert len(session.calls) == 1
    store.get(sns_signer.cert_url)  # past the TTL: fetched again
    assert len(session.calls) == 2
    assert session.calls[0][1]["allow_redirects"] is False
    assert session.calls[0][1]["timeout"] > 0


def test_https_store_rejects_bad_url_oversize_and_errors(sns_signer: SnsTestSigner) -> None:
    session = FakeSession(b"x" * 100_000)
    store = HttpsCertificateStore(session=session)
    with pytest.raises(WebhookVerificationError) as exc:
        store.get("https://evil.example.com/a.pem")
    assert reason_of(exc) == "cert_host_not_allowed"
    assert session.calls == []
    with pytest.raises(WebhookVerificationError) as exc:
        store.get(sns_signer.cert_url)
    assert reason_of(exc) == "cert_fetch_failed"
    store = HttpsCertificateStore(session=FakeSession(b"", status=302))
    with pytest.raises(WebhookVerificationError) as exc:
        store.get(sns_signer.cert_url)
    assert reason_of(exc) == "cert_fetch_failed"


# --------------------------------------------------------------------------- SendGrid


@pytest.fixture(scope="module")
def sg_signer() -> SendGridTestSigner:
    return SendGridTestSigner.generate()


SG_PAYLOAD = json.dumps(
    [{"email": "a@example.com", "event": "delivered", "timestamp": int(NOW),
      "sg_event_id": "ev1", "sg_message_id": "abc.filter0001"}]
).encode() + b"\r\n"


def sg_verify(signer_key: str, payload: bytes, headers: dict[str, str]) -> list[Any]:
    verifier = SendGridVerifier(signer_key, clock=fixed_clock)
    return verifier.verify(payload, headers.get(SIGNATURE_HEADER), headers.get(TIMESTAMP_HEADER))


def test_sendgrid_valid(sg_signer: SendGridTestSigner) -> None:
    headers = sg_signer.sign(SG_PAYLOAD, timestamp=int(NOW) - 30)
    events = sg_verify(sg_signer.public_key_b64, SG_PAYLOAD, headers)
    assert events[0]["sg_event_id"] == "ev1"


def test_sendgrid_tampered(sg_signer: SendGridTestSigner) -> None:
    headers = sg_signer.sign(SG_PAYLOAD, timestamp=int(NOW))
    with pytest.raises(WebhookVerificationError) as exc:
        sg_verify(sg_signer.public_key_b64, SG_PAYLOAD.replace(b"delivered", b"bounce"), headers)
    assert reason_of(exc) == "bad_signature"
    # The timestamp is signed too: shifting it breaks the signature.
    headers[TIMESTAMP_HEADER] = str(int(NOW) + 1)
    with pytest.raises(WebhookVerificationError) as exc:
        sg_verify(sg_signer.public_key_b64, SG_PAYLOAD, headers)
    assert reason_of(exc) == "bad_signature"


def test_sendgrid_wrong_key(sg_signer: SendGridTestSigner) -> None:
    headers = SendGridTestSigner.generate().sign(SG_PAYLOAD, timestamp=int(NOW))
    with pytest.raises(WebhookVerificationError) as exc:
        sg_verify(sg_signer.public_key_b64, SG_PAYLOAD, headers)
    assert reason_of(exc) == "bad_signature"


def test_sendgrid_stale_and_future(sg_signer: SendGridTestSigner) -> None:
    for ts, reason in ((int(NOW) - 301, "stale_timestamp"), (int(NOW) + 301, "future_timestamp")):
        headers = sg_signer.sign(SG_PAYLOAD, timestamp=ts)
        with pytest.raises(WebhookVerificationError) as exc:
            sg_verify(sg_signer.public_key_b64, SG_PAYLOAD, headers)
        assert reason_of(exc) == reason


def test_sendgrid_missing_headers(sg_signer: SendGridTestSigner) -> None:
    headers = sg_signer.sign(SG_PAYLOAD, timestamp=int(NOW))
    for drop, reason in ((SIGNATURE_HEADER, "missing_signature"),
                         (TIMESTAMP_HEADER, "missing_timestamp")):
        partial = {k: v for k, v in headers.items() if k != drop}
        with pytest.raises(WebhookVerificationError) as exc:
            sg_verify(sg_signer.public_key_b64, SG_PAYLOAD, partial)
        assert reason_of(exc) == reason


def test_sendgrid_rejects_non_p256_key() -> None:
    with pytest.raises(ValueError):
        SendGridVerifier("not-a-key")


# --------------------------------------------------------------------------- Mailgun

MG_KEY = "key-0123456789abcdef0123456789abcdef"
MG_EVENT = {"event": "delivered", "id": "evt1", "timestamp": NOW, "recipient": "a@example.com"}


def mg_verifier(guard: Any = None, key: str = MG_KEY) -> MailgunVerifier:
    return MailgunVerifier(key, guard or InMemoryReplayGuard(), clock=fixed_clock)


def test_mailgun_valid() -> None:
    body = mailgun_body(MG_KEY, MG_EVENT, timestamp=int(NOW) - 10)
    assert mg_verifier().verify(body)["event-data"]["id"] == "evt1"


def test_mailgun_wrong_key() -> None:
    body = mailgun_body("some-other-key", MG_EVENT, timestamp=int(NOW))
    with pytest.raises(WebhookVerificationError) as exc:
        mg_verifier().verify(body)
    assert reason_of(exc) == "bad_signature"


def test_mailgun_tampered_signature_block() -> None:
    payload = json.loads(mailgun_body(MG_KEY, MG_EVENT, timestamp=int(NOW) - 1000))
    payload["signature"]["timestamp"] = str(int(NOW))  # try to refresh a stale request
    with pytest.raises(WebhookVerificationError) as exc:
        mg_verifier().verify(json.dumps(payload))
    assert reason_of(exc) == "bad_signature"


def test_mailgun_stale() -> None:
    body = mailgun_body(MG_KEY, MG_EVENT, timestamp=int(NOW) - 301)
    with pytest.raises(WebhookVerificationError) as exc:
        mg_verifier().verify(body)
    assert reason_of(exc) == "stale_timestamp"


def test_mailgun_replayed_token_in_memory() -> None:
    verifier = mg_verifier(InMemoryReplayGuard())
    body = mailgun_body(MG_KEY, MG_EVENT, timestamp=int(NOW))
    verifier.verify(body)
    with pytest.raises(WebhookVerificationError) as exc:
        verifier.verify(body)
    assert reason_of(exc) == "replayed_token"


def test_mailgun_bad_signature_does_not_burn_token() -> None:
    guard = InMemoryReplayGuard()
    good = json.loads(mailgun_body(MG_KEY, MG_EVENT, timestamp=int(NOW)))
    forged = json.loads(json.dumps(good))
    forged["signature"]["signature"] = "0" * 64
    with pytest.raises(WebhookVerificationError):
        mg_verifier(guard).verify(json.dumps(forged))
    assert mg_verifier(guard).verify(json.dumps(good))


def test_mailgun_malformed() -> None:
    for body in (b"nope", b"{}", json.dumps({"event-data": {}}).encode()):
        with pytest.raises(WebhookVerificationError) as exc:
            mg_verifier().verify(body)
        assert reason_of(exc) in {"malformed_payload", "missing_signature"}


def test_in_memory_guard_expires() -> None:
    ticks = iter([0.0, 5.0, 11.0])
    guard = InMemoryReplayGuard(monotonic=lambda: next(ticks))
    assert guard.seen_before("t", 10) is False
    assert guard.seen_before("t", 10) is True
    assert guard.seen_before("t", 10) is False  # expired after 10 s


@pytest.fixture
def redis_guard() -> Any:
    from core.redis_client import get_redis

    client = get_redis()  # the session's Redis (embedded or REDIS_URL), never skipped
    prefix = f"notifier:test:{uuid.uuid4().hex}:mailgun-token:"
    yield client, prefix, RedisReplayGuard(client, prefix=prefix)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)


def test_mailgun_replayed_token_redis(redis_guard: Any) -> None:
    client, prefix, guard = redis_guard
    body = mailgun_body(MG_KEY, MG_EVENT, timestamp=int(NOW), token="a" * 50)
    mg_verifier(guard).verify(body)
    with pytest.raises(WebhookVerificationError) as exc:
        mg_verifier(guard).verify(body)  # a second worker sees the same token
    assert reason_of(exc) == "replayed_token"
    ttl = client.ttl(f"{prefix}{'a' * 50}")
    assert 0 < ttl <= 601


def test_redis_guard_default_prefix_shape() -> None:
    from delivery.providers.webhooks.replay import DEFAULT_MAILGUN_TOKEN_PREFIX

    assert DEFAULT_MAILGUN_TOKEN_PREFIX == "notifier:webhooks:mailgun-token:"
