"""Delivery fixtures: an isolated Redis prefix per test and providers pointed at the fakes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from delivery.models import EmailMessage
from delivery.providers import get_provider
from delivery.services.rate_limits import limits_cache_clear
from notifier.celery import app as celery_app
from testkit.fakes import FakeMailgun, FakeSendGrid, FakeSES
from tests.support.broker_messages import unacked_forget


@pytest.fixture(autouse=True)
def redis_prefix(settings) -> str:
    """Breaker, rate-limit and schedule keys of one test never leak into another."""
    settings.REDIS_KEY_PREFIX = f"test-{uuid.uuid4().hex[:10]}"
    return settings.REDIS_KEY_PREFIX


@pytest.fixture(autouse=True)
def fresh_providers() -> Iterator[None]:
    get_provider.cache_clear()
    limits_cache_clear()
    yield
    get_provider.cache_clear()
    limits_cache_clear()


@pytest.fixture
def empty_broker() -> Iterator[None]:
    """Empty queues and no unacknowledged tasks before and after: a task another test left
    cannot run in this one's workers, nor this one's in the next."""
    celery_app.control.purge()
    unacked_forget()
    yield
    celery_app.control.purge()
    unacked_forget()


@pytest.fixture
def esps(settings) -> Iterator[dict]:
    """Three fake ESPs, configured as the providers (order set per test)."""
    with FakeSES() as ses, FakeSendGrid() as sendgrid, FakeMailgun() as mailgun:
        settings.SES_ENDPOINT_URL = ses.url
        settings.AWS_ACCESS_KEY_ID = settings.AWS_SECRET_ACCESS_KEY = "test"
        settings.SENDGRID_API_URL, settings.SENDGRID_API_KEY = sendgrid.url, "test-sendgrid-key"
        settings.MAILGUN_API_URL, settings.MAILGUN_API_KEY = mailgun.url, "test-mailgun-key"
        settings.MAILGUN_DOMAIN = "mg.example.org"
        settings.ESP_READ_TIMEOUT_SECONDS = 1.0
        settings.ESP_CONNECT_TIMEOUT_SECONDS = 1.0
        yield {"ses": ses, "sendgrid": sendgrid, "mailgun": mailgun}


def esp_env(esps: dict) -> dict[str, str]:
    """The same configuration for worker subprocesses."""
    return {
        "SES_ENDPOINT_URL": esps["ses"].url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
        "SENDGRID_API_URL": esps["sendgrid"].url, "SENDGRID_API_KEY": "test-sendgrid-key",
        "MAILGUN_API_URL": esps["mailgun"].url, "MAILGUN_API_KEY": "test-mailgun-key",
        "MAILGUN_DOMAIN": "mg.example.org",
    }


def ledger_counts(esps: dict, message_ids: list[int]) -> tuple[list[int], dict, dict]:
    """(lost, duplicates, cross-ESP duplicates) by our message id across every fake."""
    seen: dict[str, list[str]] = {}
    for name, fake in esps.items():
        for entry in fake.ledger.entries():
            seen.setdefault(entry.message_id, []).append(name)
    lost = [m for m in message_ids if str(m) not in seen]
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    cross = {k: v for k, v in dups.items() if len(set(v)) > 1}
    return lost, dups, cross


# Fake ESPs that record every request (testkit/fakes), one per test.
@pytest.fixture
def sendgrid() -> Iterator[FakeSendGrid]:
    with FakeSendGrid(record_requests=True) as fake:
        yield fake


@pytest.fixture
def mailgun() -> Iterator[FakeMailgun]:
    with FakeMailgun(record_requests=True) as fake:
        yield fake


@pytest.fixture
def ses() -> Iterator[FakeSES]:
    with FakeSES(record_requests=True) as fake:
        yield fake


class MessageTableStatements:
    """Statements that name the message table, through Django's execute wrapper
    (`with connection.execute_wrapper(MessageTableStatements())`)."""

    TABLE = EmailMessage._meta.db_table

    def __init__(self) -> None:
        self.sql: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if self.TABLE in sql:
            self.sql.append(sql)
        return execute(sql, params, many, context)

    @property
    def updates(self) -> int:
        """Of them, the UPDATEs of the message table itself."""
        return sum(1 for sql in self.sql if "UPDATE" in sql and self.TABLE in sql.split("SET")[0])
