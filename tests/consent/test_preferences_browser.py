"""The preference page in Debian's headless Chromium (Playwright, executable_path): a recipient
opens the link a broadcast email carried, leaves one topic with the keyboard and joins another
with a click, saves, and the change is in the database and on the next visit. The page loads no
script and nothing from another host, and its own stylesheet applies under its policy."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from audience.models import ConsentChange, Contact, Topic, TopicSubscription
from delivery.services.ledger.send_reads import messages_queued_read_for_send
from delivery.services.sending import outgoing_email
from tests import factories
from tests.support.browser import CHROMIUM_ARGS, chromium_executable, playwright_session

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
EMAIL = "ada@x.io"


def link_in_mail(version) -> str:
    """The preference link of a broadcast email, as the send path renders it."""
    message = factories.email_message(version=version, client=factories.owner(), stream="broadcast",
                                      recipient=EMAIL)
    (row,) = messages_queued_read_for_send(message_ids=[message.pk])
    html = outgoing_email(row, version).html
    return html.split('<a href="')[-1].split('"')[0]


def test_a_recipient_changes_topics_by_keyboard_and_click(live_server, settings, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls between browser steps
    settings.NOTIFIER_PUBLIC_URL = live_server.url
    service = factories.owner()
    news = Topic.objects.create(client=service, name="Product news")
    digest = Topic.objects.create(client=service, name="Weekly digest", default_subscribed=False)
    Contact.objects.create(client=service, email=EMAIL)
    link = link_in_mail(factories.template_version(html_body="<html><body><p>Hi {{ name }}</p></body>"))
    assert link.startswith(f"{live_server.url}/p/")
    ours, elsewhere = urlsplit(live_server.url).netloc, []

    with playwright_session() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("request", lambda r: elsewhere.append(r.url) if urlsplit(r.url).netloc != ours else None)
            page.goto(link, timeout=30_000)
            assert page.get_attribute("html", "lang") == "en"
            assert page.evaluate("getComputedStyle(document.querySelector('button')).borderRadius") == "6px"
            assert page.evaluate("document.scripts.length") == 0
            assert page.is_checked(f"#topic-{news.pk}") and not page.is_checked(f"#topic-{digest.pk}")
            # Keyboard: tab to the first checkbox (Product news) and toggle it with the space bar.
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.id") == f"topic-{news.pk}"
            page.keyboard.press("Space")
            page.click(f"label[for=topic-{digest.pk}]")  # the label toggles its checkbox
            page.click("button[type=submit]")
            page.wait_for_selector("#saved", timeout=15_000)
            assert not page.is_checked(f"#topic-{news.pk}") and page.is_checked(f"#topic-{digest.pk}")
            page.goto(link, timeout=30_000)  # the next visit shows the saved choices
            assert not page.is_checked(f"#topic-{news.pk}") and page.is_checked(f"#topic-{digest.pk}")
            assert page.query_selector("#saved") is None
        finally:
            browser.close()
    chosen = dict(TopicSubscription.objects.filter(email=EMAIL).values_list("topic_id", "subscribed"))
    assert chosen == {news.pk: False, digest.pk: True}
    assert set(ConsentChange.objects.values_list("source", flat=True)) == {"preference_page"}
    assert elsewhere == []
