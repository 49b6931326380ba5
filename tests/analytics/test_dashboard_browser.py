"""The dashboard in Debian's headless Chromium (Playwright, executable_path; no browser download):
a real send worker mails a running campaign to a local SMTP server; an operator logs in, watches
the campaign's progress bar advance, pauses it from the page; a screenshot is saved under
test-artifacts/ (gitignored)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from campaigns.models import Campaign
from campaigns.services import lifecycle
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from notifier.celery import app as celery_app
from testkit import processes
from tests.feedback.helpers import campaign
from tests.support.browser import CHROMIUM_ARGS, chromium_executable, playwright_session

pytestmark = pytest.mark.e2e
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"


def running_campaign(size: int) -> Campaign:
    c = campaign(status=Campaign.Status.SENDING)
    rows = [
        EmailMessage(campaign=c, recipient=f"fan{i:04d}@example.com", template_version=c.template_version,
                     context={"name": f"Fan {i}"}, priority=2, idempotency_key=f"dash{c.id}:{i}")
        for i in range(size)
    ]
    EmailMessage.objects.bulk_create(rows)
    return c


def progress(page, campaign_id: int) -> int:
    return int(page.get_attribute(f'tr[data-campaign="{campaign_id}"] progress', "value") or 0)


def test_operator_watches_a_campaign_advance_and_pauses_it(
    live_server, smtp_server, process_env, spawn, tmp_path, monkeypatch
):
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # plain blocking calls between browser steps, so Django's async guard is lifted here only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    get_user_model().objects.create_user("operator", password="s3cret-pass", is_staff=True)
    c = running_campaign(600)
    env = {**process_env, "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM": "1.5", "NOTIFIER_WORKER_P2_CONCURRENCY": "1"}
    spawn(processes.celery_worker("normal", env, tmp_path)).wait_for_log("ready.", timeout=60)
    ids = list(c.messages.order_by("id").values_list("id", flat=True))  # the ORM outside the browser

    ARTIFACTS.mkdir(exist_ok=True)
    with playwright_session() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{live_server.url}/dashboard/", timeout=30_000)
            assert "/admin/login/" in page.url  # staff login required
            page.fill("input[name=username]", "operator")
            page.fill("input[name=password]", "s3cret-pass")
            page.click("input[type=submit]")
            page.wait_for_url("**/dashboard/", timeout=30_000)
            row = f'tr[data-campaign="{c.id}"]'
            page.wait_for_selector(row, timeout=15_000)
            first = progress(page, c.id)
            # Sent only now: a cold Chromium and a loaded machine took longer to log in than the
            # worker took to send the whole campaign, and a full bar cannot move (CI, 2026-12-01).
            messages_enqueue(message_ids=ids, priority=2)  # the broker only
            # The page refreshes itself: no reload, the bar must move on its own.
            page.wait_for_function(
                "([sel, v]) => Number(document.querySelector(sel + ' progress').value) > v",
                arg=[row, first], timeout=60_000,
            )
            assert progress(page, c.id) > first
            # The normal-priority worker shows up through `celery inspect` (cached briefly).
            page.wait_for_function(
                "() => document.querySelector('.tile[data-priority=normal] [data-field=workers]')"
                ".textContent === '1'", timeout=30_000,
            )
            assert page.locator("#flower-link").get_attribute("href")
            page.click(f'{row} button[data-action="pause"]')
            page.wait_for_function(
                "sel => document.querySelector(sel + ' .status').textContent === 'PAUSED'",
                arg=row, timeout=15_000,
            )
            time.sleep(0.5)  # let the charts finish drawing for the screenshot
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        finally:
            browser.close()
    assert Campaign.objects.get(pk=c.pk).status == Campaign.Status.PAUSED
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def _log_in(page, base_url: str) -> None:
    page.goto(f"{base_url}/dashboard/", timeout=30_000)
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "s3cret-pass")
    page.click("input[type=submit]")
    page.wait_for_url("**/dashboard/", timeout=30_000)


def _answer(page) -> tuple[str, str]:
    page.wait_for_function("() => document.getElementById('campaign-answer').textContent !== ''",
                           timeout=15_000)
    text = page.text_content("#campaign-answer")
    page.evaluate("() => { document.getElementById('campaign-answer').textContent = ''; }")
    return text, page.get_attribute("#campaign-answer", "class")


def test_cancel_asks_first_and_shows_the_answer(live_server, purged_queues, monkeypatch):
    """Cancel asks before it acts; a refusal (someone else cancelled first: 409) is shown, not
    swallowed. Also: an ended campaign stays listed without buttons, the idle webhook chart draws
    its zero line on a whole-number axis, and the front page loads under its own policy."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls between browser steps
    get_user_model().objects.create_user("operator", password="s3cret-pass", is_staff=True)
    first, second = campaign(), campaign()
    with playwright_session() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            _log_in(page, live_server.url)
            cancel = f'tr[data-campaign="{first.id}"] button[data-action="cancel"]'
            page.wait_for_selector(cancel, timeout=15_000)

            asked: list[str] = []
            page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
            page.click(cancel)
            assert "cannot be undone" in asked[0]
            time.sleep(0.5)
            assert Campaign.objects.get(pk=first.pk).status == Campaign.Status.SENDING  # nothing sent

            page.once("dialog", lambda d: d.accept())
            page.click(cancel)
            assert _answer(page) == (f"Campaign {first.id} cancelled: now CANCELLED.", "answer ok")
            assert Campaign.objects.get(pk=first.pk).status == Campaign.Status.CANCELLED
            # Kept on the page as an ended campaign, without buttons.
            page.wait_for_function(
                "sel => document.querySelector(sel + ' .status').textContent === 'CANCELLED'",
                arg=f'tr[data-campaign="{first.id}"]', timeout=15_000)
            assert page.locator(f'tr[data-campaign="{first.id}"] button').count() == 0

            def another_operator_first(dialog) -> None:
                lifecycle.campaign_cancel(campaign_id=second.pk)
                dialog.accept()

            page.once("dialog", another_operator_first)
            page.click(f'tr[data-campaign="{second.id}"] button[data-action="cancel"]')
            assert _answer(page) == (
                f"Campaign {second.id} not cancelled: Cannot cancel a campaign that is CANCELLED.",
                "answer refused")

            # No webhook events in the last hour: one flat zero line, whole numbers on the axis.
            chart = page.evaluate("""() => {
                const c = Chart.getChart('events-chart');
                return {sets: c.data.datasets.map((d) => [d.label, Math.max(...d.data)]),
                        ticks: c.scales.y.ticks.map((t) => t.value)};
            }""")
            assert chart["sets"] == [["no events", 0]]
            assert chart["ticks"] and all(float(t).is_integer() for t in chart["ticks"])

            # The browser logs the refused request itself; nothing else went wrong on the page.
            assert errors == ["Failed to load resource: the server responded with a status of 409 (Conflict)"]

            errors.clear()
            page.goto(f"{live_server.url}/", timeout=30_000)
            assert page.locator("a#link-dashboard").get_attribute("href") == "/dashboard/"
            background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
            assert background == "rgb(246, 247, 249)"  # its stylesheet loaded under its policy
            assert errors == []  # no refused asset, no policy violation
        finally:
            browser.close()
    celery_app.control.purge()  # the cancels' row tasks, which no worker here runs
