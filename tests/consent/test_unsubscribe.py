"""RFC 8058 one-click unsubscribe: signed headers on campaign mail (and any broadcast mail);
GET changes nothing; POST does. Links sent before the move to consent/ keep working."""

from __future__ import annotations

import pytest
from django.core import signing
from django.test import Client
from django.urls import reverse

from audience.models import Contact, Suppression
from campaigns.models import Campaign
from consent.tokens import unsubscribe_token, unsubscribe_token_read, unsubscribe_url
from delivery.extensions import message_headers
from delivery.models import EmailMessage
from tests import factories

pytestmark = pytest.mark.django_db
MS = EmailMessage.Status


@pytest.fixture
def message(db) -> EmailMessage:
    version = factories.template_version()
    contact = Contact.objects.create(client=factories.owner(), email="ada@x.io")
    campaign = Campaign.objects.create(name="c", template_version=version, status="SENDING")
    factories.email_message(version=version, campaign=campaign, contact=contact, recipient="ada@x.io",
                            idempotency_key="c:1:1")
    return factories.email_message(version=version, campaign=campaign, contact=contact,
                                   recipient="ada@x.io", idempotency_key="c:1:2")


def test_campaign_mail_carries_one_click_headers_transactional_none(message):
    headers = message_headers(message)
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    token = unsubscribe_token(contact_id=message.contact_id, campaign_id=message.campaign_id)
    assert headers["List-Unsubscribe"] == f"<http://127.0.0.1:8000/u/{token}/>"
    assert message_headers(factories.email_message()) == {}


def test_get_confirms_without_change_post_unsubscribes_idempotently(message):
    url = message_headers(message)["List-Unsubscribe"].strip("<>").removeprefix("http://127.0.0.1:8000")
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(url)
    assert page.status_code == 200 and b"<form method=\"post\">" in page.content
    assert Contact.objects.get(pk=message.contact_id).subscribed
    for _ in range(2):  # the mailbox provider's one-click POST, repeated
        response = browser.post(url, "List-Unsubscribe=One-Click",
                                content_type="application/x-www-form-urlencoded")
        assert response.status_code == 200
    assert not Contact.objects.get(pk=message.contact_id).subscribed
    # Its rows still waiting in the running campaign are not sent.
    statuses = EmailMessage.objects.filter(contact_id=message.contact_id).values_list("status", flat=True)
    assert set(statuses) == {MS.SUPPRESSED}


def test_tampered_token_is_refused(message):
    token = unsubscribe_token(contact_id=message.contact_id, campaign_id=message.campaign_id)
    forged = token.replace(f"{message.contact_id}.", f"{message.contact_id + 1}.", 1)
    assert Client().post(f"/u/{forged}/").status_code == 404
    assert Contact.objects.get(pk=message.contact_id).subscribed


def test_unsubscribe_adds_one_suppression_listed_by_the_api(message, api):
    url = message_headers(message)["List-Unsubscribe"].strip("<>").removeprefix("http://127.0.0.1:8000")
    for _ in range(3):  # repeated clicks and one-click POSTs
        assert Client().post(url).status_code == 200
    listed = api.get("/api/v1/suppressions").json()["results"]
    assert [(row["email"], row["reason"]) for row in listed] == [("ada@x.io", "unsubscribe")]


def test_unsubscribe_leaves_a_bounce_as_it_is_and_adds_the_broadcast_scope(message, api):
    Suppression.objects.create(email="ada@x.io", reason="hard_bounce", source="ses")
    url = message_headers(message)["List-Unsubscribe"].strip("<>").removeprefix("http://127.0.0.1:8000")
    assert Client().post(url).status_code == 200
    rows = Suppression.objects.order_by("scope").values_list("email", "reason", "scope", "client_id")
    assert list(rows) == [("ada@x.io", "hard_bounce", "all", None),
                          ("ada@x.io", "unsubscribe", "broadcast", message.contact.client_id)]
    assert not Contact.objects.get(pk=message.contact_id).subscribed


@pytest.mark.parametrize(("contact_id", "campaign_id"), [(1, 2), (987_654_321, 12), (5, 10**12)])
def test_prepared_signing_gives_the_signers_token_and_reverses_url(contact_id, campaign_id, settings):
    """The per-process HMAC and URL prefix (decision 57) produce exactly what Signer.sign and
    reverse() did, so links already sent keep working and new ones read back."""
    token = unsubscribe_token(contact_id=contact_id, campaign_id=campaign_id)
    signer = signing.Signer(salt="notifier.campaigns.unsubscribe")
    assert token == signer.sign(f"{contact_id}.{campaign_id}")
    target = unsubscribe_token_read(token)
    assert (target.contact_id, target.campaign_id) == (contact_id, campaign_id)
    settings.NOTIFIER_PUBLIC_URL = "https://mail.example.org/base/"
    assert unsubscribe_url(token) == "https://mail.example.org/base" + reverse("unsubscribe", args=[token])
    assert reverse("unsubscribe", args=[token]) == f"/u/{token}/"  # the path every sent link has
