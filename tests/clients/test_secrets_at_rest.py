"""F18: API keys and the other secrets a deployment hands us, with real PostgreSQL and real
HTTP.

- A full `pg_dump` of the test database (the embedded PostgreSQL's own binary) holds none of
  the secrets the test created and used: API keys (the whole key and its secret part), the
  Mailgun webhook signing key a stored webhook was signed with, the ESP API key a send used.
  The dump is checked to hold each key's public prefix and hash, so an empty or failed dump
  cannot pass.
- Over HTTP to the Procfile's web server: a wrong secret is a 401, a revoked key is refused
  within the key cache's lifetime (decision 53), a good key works.
- Constant-time comparison, observed rather than read from the source: the standard library's
  `compare_digest` is wrapped (a spy: it records its arguments and returns the real answer),
  and verifying a key must compare the stored hash with the presented key's hash through it;
  a Mailgun webhook's signature likewise. A plain `==` anywhere in either check would make
  these tests fail (no call seen).
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from io import StringIO

import pytest
import requests
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from clients.key_format import key_from_wire
from clients.models import ApiKey
from clients.services import api_key_revoke, service_create
from delivery.providers import get_provider
from delivery.services.sending import message_batch_send
from devtools.embedded import _postgres_bin_dir
from notifier.celery import app as celery_app
from testkit import processes
from testkit.fakes import FakeSendGrid
from testkit.ports import free_port
from testkit.webhook_signing import mailgun_body
from tests.factories import email_message, template_version
from tests.feedback import samples
from tests.support.web import wait_until_serving, web_server

Spy = list[tuple[bytes, bytes, bool]]


def _key(name: str) -> str:
    """A key made as an operator makes one: the create_api_key command prints it last."""
    out = StringIO()
    call_command("create_api_key", name, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def _auth(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Api-Key {key}"}


def _wrong_secret(key: str) -> str:
    prefix, _, secret = key.partition(".")
    return f"{prefix}.{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}"


def _pg_dump() -> str:
    """The whole test database as SQL, by the server distribution's own pg_dump."""
    result = subprocess.run(
        [str(_postgres_bin_dir() / "pg_dump"), processes.database_url()],
        capture_output=True, text=True, timeout=120, check=True,
        env={"PGPASSWORD": connection.settings_dict.get("PASSWORD") or "", "PATH": "/usr/bin:/bin"},
    )
    return result.stdout


def _in_clear(dump: str, secret: str) -> list[str]:
    """Which spellings of `secret` the dump holds: as is, base64 or hex."""
    spellings = {"plain": secret, "base64": base64.b64encode(secret.encode()).decode().rstrip("="),
                 "hex": secret.encode().hex()}
    return [name for name, spelled in spellings.items() if spelled in dump]


@pytest.fixture
def compare_digest_calls(monkeypatch) -> Iterator[Spy]:
    """Every stdlib `compare_digest` call (the one Django's constant_time_compare and our
    webhook checks use), with its arguments and its real result."""
    calls: Spy = []
    real = hmac.compare_digest

    def spy(a, b) -> bool:
        result = real(a, b)
        calls.append((bytes(a, "utf-8") if isinstance(a, str) else bytes(a),
                       bytes(b, "utf-8") if isinstance(b, str) else bytes(b), result))
        return result

    monkeypatch.setattr(hmac, "compare_digest", spy)
    monkeypatch.setattr(secrets, "compare_digest", spy)
    yield calls


def _use_key(client, key: str) -> None:
    """A template and an idempotent send with `key`, and a try with a wrong secret."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    template = {"name": name, "subject": "Hi", "html_body": "<p>{{ code }}</p>"}
    assert client.post("/api/v1/templates", template, content_type="application/json",
                       **_auth(key)).status_code == 201
    send = {"to": "ada@example.com", "template": name, "context": {"code": "1"}}
    assert client.post("/api/v1/messages", send, content_type="application/json",
                       HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex, **_auth(key)).status_code == 202
    assert client.get("/api/v1/messages/1", **_auth(_wrong_secret(key))).status_code == 401


def _use_mailgun_webhook(client, settings) -> str:
    """A signed Mailgun webhook, accepted and stored; returns the signing key."""
    settings.FEEDBACK_MAILGUN_SIGNING_KEY = f"key-{secrets.token_hex(16)}"
    message = email_message(status="SENT", provider="mailgun", provider_message_id=f"mg-{uuid.uuid4().hex}")
    data = samples.mailgun_event_data("delivered", message_id=message.id, recipient=message.recipient,
                                      when=timezone.now(), event_id=f"mg-{uuid.uuid4().hex}")
    response = client.post("/webhooks/mailgun/", mailgun_body(settings.FEEDBACK_MAILGUN_SIGNING_KEY, data),
                           content_type="application/json")
    assert response.status_code == 200, response.content
    return settings.FEEDBACK_MAILGUN_SIGNING_KEY


def _use_sendgrid(settings) -> str:
    """One message sent through a fake SendGrid with a secret API key; returns the key."""
    api_key = f"SG.{secrets.token_urlsafe(24)}"
    get_provider.cache_clear()  # providers are built once per process, from the settings
    try:
        with FakeSendGrid(api_key=api_key) as fake:
            settings.NOTIFIER_PROVIDERS, settings.SENDGRID_API_URL = ["sendgrid"], fake.url
            settings.SENDGRID_API_KEY = api_key
            message = email_message(version=template_version(), priority=2)
            assert message_batch_send(message_ids=[message.id], token=uuid.uuid4().hex).sent == 1
    finally:
        get_provider.cache_clear()
    return api_key


@pytest.mark.django_db(transaction=True)
def test_a_database_dump_holds_no_secret_in_clear(client, settings):
    celery_app.control.purge()
    keys = {"command": _key("billing"), "service": service_create(name="crm")[1]}
    revoked_client, keys["revoked"] = service_create(name="old")
    for key in keys.values():  # each key used for real: a write, an idempotent send, a bad try
        _use_key(client, key)
    api_key_revoke(api_key=revoked_client.api_keys.get())
    assert client.get("/api/v1/messages/1", **_auth(keys["revoked"])).status_code == 401
    others = {"mailgun webhook signing key": _use_mailgun_webhook(client, settings),
              "sendgrid api key": _use_sendgrid(settings)}
    celery_app.control.purge()

    dump = _pg_dump()
    for name, key in keys.items():  # the dump has the keys table: prefix and hash are there
        row = ApiKey.objects.get(prefix=key_from_wire(key)[1].partition(".")[0])
        assert row.prefix in dump and row.hashed_key in dump, f"{name}'s row is not in the dump"
    secrets_made = {f"{name} key": key for name, key in keys.items()}
    secrets_made |= {f"{name} key's secret": key.partition(".")[2] for name, key in keys.items()}
    secrets_made |= others
    assert {name: _in_clear(dump, value) for name, value in secrets_made.items()} == {
        name: [] for name in secrets_made}


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_wrong_secret_and_revoked_key_are_refused_by_the_web_server(tmp_path, spawn):
    client, key = service_create(name="svc")
    port = free_port()
    spawn(web_server(port, processes.subprocess_env(), tmp_path, workers=1))
    wait_until_serving(port)
    url = f"http://127.0.0.1:{port}/api/v1/messages/999999"

    def status(presented: str) -> int:
        return requests.get(url, headers={"Authorization": f"Api-Key {presented}"}, timeout=10).status_code

    assert status(key) == 404  # a good key: past authentication, no such message
    assert status(_wrong_secret(key)) == 401
    assert status(key.partition(".")[0] + ".") == 401
    api_key_revoke(api_key=client.api_keys.get())
    cache_seconds = 5.0  # NOTIFIER_API_KEY_CACHE_SECONDS's default, which the server runs with
    deadline = time.monotonic() + cache_seconds + 5
    while status(key) != 401:
        assert time.monotonic() < deadline, "a revoked key was still accepted past the key cache"
        time.sleep(0.2)


def _key_checks(calls: Spy, hashed_key: str) -> list[bool]:
    """The results of the compare_digest calls that compared against this stored hash."""
    return [result for a, b, result in calls if hashed_key.encode() in (a, b)]


@pytest.mark.django_db
def test_an_api_key_is_verified_with_a_constant_time_compare(client, compare_digest_calls):
    service, key = service_create(name="svc")
    hashed = ApiKey.objects.get(service=service).hashed_key
    for presented, expected_status, expected_result in [(_wrong_secret(key), 401, False), (key, 404, True)]:
        compare_digest_calls.clear()
        assert client.get("/api/v1/messages/999999", **_auth(presented)).status_code == expected_status
        # The stored hash met the presented key's hash in compare_digest, once, and that
        # comparison's answer is the one authentication followed.
        assert _key_checks(compare_digest_calls, hashed) == [expected_result]
        [(a, b, _)] = [c for c in compare_digest_calls if hashed.encode() in c[:2]]
        assert len(a) == len(b)  # hash against hash: the length says nothing of the secret


@pytest.mark.django_db
def test_a_webhook_signature_is_checked_with_a_constant_time_compare(client, settings, compare_digest_calls):
    settings.FEEDBACK_MAILGUN_SIGNING_KEY = signing_key = f"key-{secrets.token_hex(16)}"
    message = email_message(status="SENT", provider="mailgun", provider_message_id="mg-1")
    data = samples.mailgun_event_data("delivered", message_id=message.id, recipient=message.recipient,
                                      when=timezone.now(), event_id=f"mg-{uuid.uuid4().hex}")
    body = json.loads(mailgun_body(signing_key, data))
    good = body["signature"]["signature"]
    bad = good[:-1] + ("0" if good[-1] != "0" else "1")  # same length, last digit wrong
    for signature, expected_status, expected_result in [(bad, 403, False), (good, 200, True)]:
        compare_digest_calls.clear()
        raw = json.dumps({**body, "signature": {**body["signature"], "signature": signature}})
        response = client.post("/webhooks/mailgun/", raw, content_type="application/json")
        assert response.status_code == expected_status, response.content
        checks = [result for a, b, result in compare_digest_calls if signature.encode() in (a, b)]
        assert checks == [expected_result]
