"""Shared fixtures: API clients and keys, a recording SMTP server, real worker processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from notifier.celery import app as celery_app
from templates.services import template_create
from testkit import processes
from testkit.smtp import RecordingSmtpServer
from tests import factories
from tests.support.session_services import pytest_configure, pytest_unconfigure

__all__ = ["pytest_configure", "pytest_unconfigure"]  # the session's services (hooks)


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
