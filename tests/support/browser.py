"""Debian's Chromium for Playwright tests (executable_path: Playwright never downloads a browser)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from unittest import mock

import pytest
from django.db import connections
from playwright.sync_api import Playwright, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_executable() -> str:
    """CHROMIUM, or the test fails naming the command that installs it (`make test` runs that
    check before the suite; a part run with PYTEST_ARGS does not)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Debian's chromium is not at {CHROMIUM}: sudo devtools/test_packages.sh")
    return CHROMIUM


@contextlib.contextmanager
def playwright_session() -> Iterator[Playwright]:
    """sync_playwright() for tests that call the ORM between browser steps.

    Playwright's sync API keeps an asyncio loop running in this thread while the block runs, and
    Django's connections then live in that loop's context (asgiref's thread-critical Local), not
    in the thread's: the ORM calls inside the block open a database session of their own, which
    neither the test's teardown nor pytest-django's closes. It outlived the session and kept the
    test database from being dropped ("is being accessed by other users"). Closed here, still
    inside the block, where `connections` is that context's, with Django's async-safety check
    off for the call: the running loop makes `close()` refuse (SynchronousOnlyOperation). A test
    that makes no ORM call in its block, and so does not set DJANGO_ALLOW_ASYNC_UNSAFE, still
    finds the connection an earlier block of its process opened in that context (the docs test
    after the dashboard's, in one CI run), though nothing else runs on it."""
    with sync_playwright() as pw:
        try:
            yield pw
        finally:
            with mock.patch.dict(os.environ, {"DJANGO_ALLOW_ASYNC_UNSAFE": "true"}):
                connections.close_all()
