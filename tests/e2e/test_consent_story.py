"""Issue 28's story end to end, with real pools, a recording SMTP server and Chromium.

A contact clicks one-click unsubscribe (RFC 8058's POST) in a newsletter; then their OTP is still
SENT, the next newsletter skips them, a campaign on another topic reaches them, and on the
preference page its email links to (Chromium) they join the newsletter again, which the next
newsletter shows. Every campaign is counted for lost and duplicate deliveries per recipient.
"""

from __future__ import annotations

import re
from collections import Counter
from email.message import Message

import pytest
import requests

from audience.models import ConsentChange, Segment
from campaigns.models import Campaign
from delivery.models import EmailMessage
from testkit import processes
from testkit.waiting import wait_for
from tests import factories
from tests.support.browser import CHROMIUM_ARGS, chromium_executable, playwright_session

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ADA, OTHERS = "ada@example.com", ["bob@example.com", "cy@example.com"]
EVERYONE = [ADA, *OTHERS]


class Story:
    def __init__(self, live_server, key: str, smtp_server) -> None:
        self.url, self.smtp = live_server.url, smtp_server
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Api-Key {key}"

    def post(self, path: str, body: dict, expect: int) -> dict:
        response = self.session.post(f"{self.url}{path}", json=body, timeout=15)
        assert response.status_code == expect, response.text
        return response.json()

    def mail(self) -> list[Message]:
        with self.smtp.handler.lock:
            return list(self.smtp.handler.messages)

    def campaign(self, subject: str, topic: str, segment: Segment) -> Counter:
        """Send a campaign on `topic` and wait for it; who got it (each one once, checked)."""
        version = factories.template_version(subject=subject, html_body="<html><body><p>Hi</p></body></html>")
        body = {"template_id": version.template_id, "topic": topic, "priority": "normal",
                "recipients": {"type": "segment", "segment_id": segment.pk}}
        campaign_id = self.post("/api/v1/notifications/email", body, 202)["campaign_id"]
        assert wait_for(lambda: Campaign.objects.get(pk=campaign_id).status == Campaign.Status.COMPLETED,
                        timeout=90), Campaign.objects.get(pk=campaign_id).status
        got = Counter(m["To"] for m in self.mail() if m["Subject"] == subject)
        assert max(got.values(), default=1) == 1, f"duplicates: {got}"
        return got

    def message_to(self, subject: str, to: str) -> Message:
        (found,) = [m for m in self.mail() if m["Subject"] == subject and m["To"] == to]
        return found


def _html(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/html":
            return part.get_payload(decode=True).decode()
    raise AssertionError("no HTML part")


def _preferences_link(message: Message) -> str:
    (link,) = set(re.findall(r'href="([^"]*/p/[^"]+)"', _html(message)))
    return link


def test_unsubscribe_from_the_newsletter_keeps_the_otp_and_the_other_topic_and_the_page_brings_it_back(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path, monkeypatch
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads between browser steps
    process_env["NOTIFIER_PUBLIC_URL"] = live_server.url  # the links the workers put in the mail
    story = Story(live_server, api_key, smtp_server)
    for name in ("newsletter", "product"):
        story.post("/api/v1/topics", {"name": name, "description": f"The {name}."}, 201)
    story.post("/api/v1/contacts/bulk", {"contacts": [{"email": e, "attributes": {"story": "yes"}}
                                                       for e in EVERYONE]}, 200)
    segment = Segment.objects.create(client=factories.owner(), name="story", definition={
        "conditions": [{"attribute": "story", "op": "equals", "value": "yes"}]})
    spawn(processes.ops_worker(process_env, tmp_path, concurrency=1)).wait_for_log("ready.", timeout=60)
    for role in ("critical", "normal"):
        spawn(processes.celery_worker(role, process_env, tmp_path)).wait_for_log("ready.", timeout=60)

    assert story.campaign("Newsletter 1", "newsletter", segment) == Counter(EVERYONE)
    one_click = story.message_to("Newsletter 1", ADA)["List-Unsubscribe"].strip("<>")
    assert one_click.startswith(live_server.url)
    answer = requests.post(one_click, data="List-Unsubscribe=One-Click", timeout=15,
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 200

    otp = story.post("/api/v1/messages", {"to": ADA, "template": "otp", "priority": "critical",
                                          "context": {"name": "Ada", "code": "424242"}}, 202)
    assert wait_for(lambda: EmailMessage.objects.get(pk=otp["id"]).status == EmailMessage.Status.SENT,
                    timeout=30)
    assert [m["To"] for m in story.mail() if m["Subject"] == "Your code 424242"] == [ADA]
    assert "List-Unsubscribe" not in story.message_to("Your code 424242", ADA)  # transactional

    assert story.campaign("Newsletter 2", "newsletter", segment) == Counter(OTHERS)
    assert story.campaign("Product 1", "product", segment) == Counter(EVERYONE)

    link = _preferences_link(story.message_to("Product 1", ADA))
    with playwright_session() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(link, timeout=30_000)
            newsletter = page.get_by_label("newsletter", exact=True)
            assert not newsletter.is_checked() and page.get_by_label("product", exact=True).is_checked()
            newsletter.check()
            page.click("button[type=submit]")
            page.wait_for_selector("#saved", timeout=15_000)
        finally:
            browser.close()

    assert story.campaign("Newsletter 3", "newsletter", segment) == Counter(EVERYONE)
    history = ConsentChange.objects.filter(email=ADA).order_by("occurred_at")
    assert [(c.topic.name, c.subscribed, c.source) for c in history] == [
        ("newsletter", False, "link"), ("newsletter", True, "preference_page")]
