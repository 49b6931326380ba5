"""What broadcast mail carries for its recipient (issue 28): one-click headers on every broadcast
message, `{{ preferences_url }}` and the platform's footer; transactional mail carries neither."""

from __future__ import annotations

import time

import pytest
from django.core import signing
from django.test import Client

from audience.models import ConsentChange, Contact, Suppression, Topic, TopicSubscription
from clients.services import service_create
from consent import tokens
from consent.tokens import (
    AddressTarget,
    address_unsubscribe_token,
    preference_token,
    preference_token_read,
    unsubscribe_token_read,
)
from delivery.extensions import message_headers
from delivery.models import EmailMessage
from delivery.services.ledger.send_reads import messages_queued_read_for_send
from delivery.services.sending import outgoing_email
from templates import rendering
from templates.rendering import compile_version_slots
from tests import factories

pytestmark = pytest.mark.django_db
BASE = "http://127.0.0.1:8000"
HTML = "<html><body><h1>News</h1><p>Hi {{ name }}</p></body></html>"


def broadcast(*, topic: Topic | None = None, version=None, **fields) -> EmailMessage:
    """A one-off broadcast message of the test's service: no campaign, no contact."""
    return factories.email_message(version=version or factories.template_version(html_body=HTML),
                                   client=factories.owner(), stream="broadcast", topic=topic,
                                   recipient="Ada@X.io", **fields)


def path_of(url: str) -> str:
    return url.strip("<>").removeprefix(BASE)


def claimed(message: EmailMessage):
    """The message as the send path reads it (the SQL of send_reads: service, stream, topic)."""
    (row,) = messages_queued_read_for_send(message_ids=[message.pk])
    return row


def test_a_one_off_broadcast_message_carries_one_click_for_its_topic():
    topic = Topic.objects.create(client=factories.owner(), name="Weekly digest")
    message = broadcast(topic=topic)
    headers = message_headers(claimed(message))
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    token = path_of(headers["List-Unsubscribe"]).removeprefix("/u/").rstrip("/")
    assert unsubscribe_token_read(token) == AddressTarget(factories.owner().pk, "ada@x.io", topic.pk, None)
    # The mailbox provider's POST: the address leaves that topic only, recorded as a link's.
    for _ in range(2):
        response = Client().post(path_of(headers["List-Unsubscribe"]), "List-Unsubscribe=One-Click",
                                 content_type="application/x-www-form-urlencoded")
        assert response.status_code == 200 and "Weekly digest" in response.content.decode()
    assert TopicSubscription.objects.get(topic=topic, email="ada@x.io").subscribed is False
    changes = ConsentChange.objects.values_list("email", "topic_id", "subscribed", "source")
    assert list(changes) == [("ada@x.io", topic.pk, False, "link")]
    assert not Suppression.objects.exists()  # the broadcast stream and transactional mail untouched


def test_a_broadcast_message_without_topic_leaves_the_broadcast_stream_and_get_changes_nothing():
    url = path_of(message_headers(claimed(broadcast()))["List-Unsubscribe"])
    page = Client().get(url)
    assert page.status_code == 200 and b'<form method="post">' in page.content
    assert not Suppression.objects.exists()
    assert Client().post(url).status_code == 200
    rows = Suppression.objects.values_list("email", "scope", "client_id")
    assert list(rows) == [("ada@x.io", "broadcast", factories.owner().pk)]


def test_transactional_mail_carries_no_one_click_and_no_footer():
    message = factories.email_message(version=factories.template_version(html_body=HTML),
                                      client=factories.owner())
    row = claimed(message)
    assert row.stream == "transactional"
    assert message_headers(row) == {}
    email = outgoing_email(row, message.template_version)
    assert "/p/" not in email.html and "/p/" not in email.text


@pytest.mark.parametrize("text_body", ["", "Hi {{ name }}"])
def test_broadcast_mail_gets_the_footer_in_html_and_text(text_body):
    version = factories.template_version(html_body=HTML, text_body=text_body)
    row = claimed(broadcast(version=version))
    email = outgoing_email(row, version)
    token = preference_token_read(email.html.split("/p/")[1].split("/")[0])
    assert token == AddressTarget(factories.owner().pk, "ada@x.io")
    assert email.html.index("Manage your email preferences or unsubscribe") < email.html.index("</body>")
    assert email.text.rstrip().endswith("/")
    assert "Manage your email preferences or unsubscribe: http" in email.text
    assert email.html.count("/p/") == 1 and email.text.count("/p/") == 1


def test_the_slot_path_and_the_full_path_write_the_same_footer(monkeypatch):
    monkeypatch.setattr(tokens.time, "time", lambda: 1_800_000_000.0)  # one link for both renders
    version = factories.template_version(html_body=HTML)
    row = claimed(broadcast(version=version))
    assert compile_version_slots(version.id, version.subject, version.html_body, version.text_body)
    fast = outgoing_email(row, version)
    assert fast.fill is not None and "preferences_url" in fast.fill.template.html_names
    monkeypatch.setattr(rendering, "render_slots", lambda *args, **kwargs: None)  # the full renderer
    full = outgoing_email(row, version)
    assert full.fill is None
    assert (full.html, full.text) == (fast.html, fast.text)


def test_a_template_that_shows_preferences_url_gets_it_and_no_footer(api):
    version = factories.template_version(
        subject="News",
        html_body='<html><body><p>Hi</p><a href="{{ preferences_url }}">Your choices</a></body></html>')
    email = outgoing_email(claimed(broadcast(version=version)), version)
    assert email.html.count("/p/") == 1 and "Manage your email preferences" not in email.html
    # A sender need not send it: the platform provides it (a transactional send too).
    response = api.post("/api/v1/messages", {"to": "ada@x.io", "template": version.template.name,
                                             "context": {}}, format="json")
    assert response.status_code == 202, response.content
    message = EmailMessage.objects.get(pk=response.json()["id"])
    transactional = outgoing_email(claimed(message), version)
    assert transactional.html.count("/p/") == 1


def test_the_footer_speaks_the_template_locale_where_the_pages_have_it():
    version = factories.template_version(html_body=HTML, variants={"fr": {"subject": "Bonjour",
                                                                          "html_body": HTML}})
    french = version.siblings().get(locale="fr")
    email = outgoing_email(claimed(broadcast(version=version)), french)
    assert "Gérer vos préférences d\u2019e-mail ou vous désabonner" in email.html


def test_preference_tokens_are_timestamp_signer_values_and_expire(settings):
    token = preference_token(service_id="svc_1", email="ada@x.io")
    assert signing.TimestampSigner(salt="notifier.consent.preferences").unsign(token).endswith(".svc_1")
    assert preference_token_read(token) == AddressTarget("svc_1", "ada@x.io")
    old = preference_token(service_id="svc_1", email="ada@x.io", at=time.time() - 91 * 86400)
    assert preference_token_read(old) is None
    settings.NOTIFIER_PREFERENCE_LINK_DAYS = 100
    assert preference_token_read(old) == AddressTarget("svc_1", "ada@x.io")


def test_address_tokens_cannot_be_turned_to_another_address_topic_or_service():
    service = factories.owner()
    other, _ = service_create(name="other")
    token = address_unsubscribe_token(service_id=service.pk, email="ada@x.io", topic_id=None)
    value, signature = token.rsplit(":", 1)
    forged = [
        value.replace(service.pk, other.pk) + ":" + signature,  # another service
        value.replace(value.split(".")[3], "Ym9iQHguaW8") + ":" + signature,  # bob@x.io
        value.replace("a..", "a.1.") + ":" + signature,  # a topic
        token[:-2],
    ]
    for bad in forged:
        assert unsubscribe_token_read(bad) is None
        assert Client().post(f"/u/{bad}/").status_code == 404
    assert not Suppression.objects.exists()


def test_a_preview_for_a_contact_shows_their_own_preference_link(api):
    Contact.objects.create(client=factories.owner(), email="ada@x.io")
    version = factories.template_version(subject="News",
                                         html_body='<a href="{{ preferences_url }}">Choose</a>')
    preview = api.get(f"/api/v1/templates/{version.template_id}/preview?contact=ada@x.io")
    assert preview.status_code == 200, preview.content
    token = preview.json()["html"].split("/p/")[1].split("/")[0]
    assert preference_token_read(token) == AddressTarget(factories.owner().pk, "ada@x.io")
    rendered = api.post(f"/api/v1/templates/{version.template_id}/render", {"context": {}}, format="json")
    assert rendered.status_code == 200 and "notifier.invalid/p/preview/" in rendered.json()["html"]
