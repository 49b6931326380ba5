"""Shared fixtures: API clients and keys, a recording SMTP server, real worker processes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import redis
from rest_framework.test import APIClient

from analytics.selectors.overview import live_minutes_forget
from campaigns.services.fanout_marks import fanout_marks_key
from core.redis_client import get_redis
from notifier.celery import app as celery_app
from templates.services import template_create
from testkit import processes
from testkit.smtp import RecordingSmtpServer
from tests import factories
from tests.support.database_sessions import sessions_left_on_test_database
from tests.support.session_services import pytest_configure, pytest_unconfigure

__all__ = ["pytest_configure", "pytest_unconfigure"]  # the session's services (hooks)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker) -> Iterator[None]:
    """pytest-django's, failing before its drop if a session on the test database was left open:
    the drop would fail on it and leave the database on the server (a thread or an event loop
    that used the ORM and never closed its connection, a process not stopped; browser tests use
    tests.support.browser.playwright_session)."""
    yield
    with django_db_blocker.unblock():
        left = sessions_left_on_test_database()
    if left:
        pytest.fail("sessions left open on the test database:\n" + "\n".join(left), pytrace=False)


@pytest.fixture(autouse=True)
def live_minutes_forgotten() -> None:
    """The dashboard's live series keep settled minutes' counts in Redis (decisions 135, 138):
    counts of another test's rows, rolled back since, or its zeros for minutes this test fills,
    must not show in this one."""
    live_minutes_forget()


@pytest.fixture(autouse=True)
def fanout_marks_forgotten() -> None:
    """A campaign's fan-out publish marks live in Redis under its id; a scratch database's
    campaign (a benchmark's test) or a test database made again can give another campaign the
    same id in this worker's Redis, and a resumed fan-out would then re-publish only past marks
    it never wrote (seen once in the CI: 0 rows re-published instead of 6)."""
    with contextlib.suppress(redis.RedisError):
        client = get_redis()
        stale = list(client.scan_iter(match=fanout_marks_key("*"), count=1000))
        if stale:
            client.delete(*stale)


@pytest.fixture
def api_key(db) -> str:
    """The key of factories.owner(): the client that owns the rows the factories make."""
    return factories.owner_key()


@pytest.fixture
def api(api_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key}")
    return client


@pytest.fixture
def otp_template(db):
    return template_create(
        client=factories.owner(), name="otp",
        subject="Your code {{ code }}",
        html_body="<p>Hello {{ name }}, your code is <b>{{ code }}</b></p>",
    )


@pytest.fixture
def smtp_server() -> Iterator[RecordingSmtpServer]:
    server = RecordingSmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def purged_queues() -> None:
    """Start from empty broker queues so a leftover task from another run cannot interfere."""
    celery_app.control.purge()


@pytest.fixture
def process_env(transactional_db, smtp_server: RecordingSmtpServer, purged_queues) -> dict[str, str]:
    return processes.subprocess_env(SMTP_HOST="127.0.0.1", SMTP_PORT=str(smtp_server.port))


@pytest.fixture
def spawn(tmp_path) -> Iterator:
    """spawn(managed_process) starts it and stops it at teardown."""
    started: list[processes.ManagedProcess] = []

    def _spawn(process: processes.ManagedProcess) -> processes.ManagedProcess:
        started.append(process.start())
        return process

    yield _spawn
    for process in started:
        process.stop()
