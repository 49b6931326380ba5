"""The Redoc page in Debian's headless Chromium (Playwright, executable_path): it renders the
API, the browser sends no request to any other host (no CDN, no web fonts, no logo) and the
console shows no error (a request the page's policy blocks is one: Redocly's logo was)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Route

from tests.support.browser import CHROMIUM_ARGS, chromium_executable, playwright_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_redoc_renders_with_no_request_to_another_host(live_server):
    ours = urlsplit(live_server.url).netloc
    offsite: list[str] = []
    console_errors: list[str] = []

    def only_ours(route: Route) -> None:
        # Every request the browser would put on the network passes here (a request the page's
        # Content-Security-Policy blocks never does); one for another host is recorded, not sent.
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            offsite.append(route.request.url)
            route.abort()

    with playwright_session() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("console", lambda msg: msg.type == "error" and console_errors.append(msg.text))
            page.on("pageerror", lambda exc: console_errors.append(str(exc)))
            page.route("**/*", only_ours)
            page.goto(f"{live_server.url}/api/v1/redoc/", timeout=30_000)
            page.wait_for_selector("h1:has-text('notifier API')", timeout=30_000)  # rendered
            page.wait_for_load_state("networkidle", timeout=30_000)
            assert page.locator("text=API docs by Redocly").count() == 1  # the credit, no image
        finally:
            browser.close()
    assert offsite == []
    assert console_errors == []
