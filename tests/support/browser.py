"""Debian's Chromium for Playwright tests (executable_path: Playwright never downloads a browser)."""

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_executable() -> str:
    """CHROMIUM, or the test fails naming the command that installs it (`make test` runs that
    check before the suite; a part run with PYTEST_ARGS does not)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Debian's chromium is not at {CHROMIUM}: sudo devtools/test_packages.sh")
    return CHROMIUM
