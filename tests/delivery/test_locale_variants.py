"""The sender renders the template variant of each contact's locale (one query per batch)."""

import pytest

from audience.models import Contact
from delivery.models import EmailMessage
from delivery.services.sending import message_batch_send
from templates.services import template_create
from tests import factories
from tests.factories import email_message

pytestmark = pytest.mark.django_db


@pytest.fixture
def greeting():
    return template_create(
        client=factories.owner(),
        name="greeting", subject="Hello {{ name }}", html_body="<p>Hello {{ name }}</p>",
        variants={"de": {"subject": "Hallo {{ name }}", "html_body": "<p>Hallo {{ name }}</p>"},
                  "fr-CA": {"subject": "Bonjour {{ name }}", "html_body": "<p>Bonjour</p>"}},
    )


def test_each_contact_gets_its_locale_then_language_then_default(greeting, smtp_server, settings):
    settings.SMTP_PORT = smtp_server.port
    from delivery.providers import get_provider
    get_provider.cache_clear()
    locales = {"de-AT": "Hallo Ada", "fr-CA": "Bonjour Ada", "es": "Hello Ada", "": "Hello Ada"}
    messages = []
    for n, locale in enumerate(locales):
        contact = Contact.objects.create(client=factories.owner(), email=f"c{n}@example.com", locale=locale)
        messages.append(email_message(version=greeting, contact=contact, recipient=contact.email,
                                      context={"name": "Ada"}))
    transactional = email_message(version=greeting, context={"name": "Ada"})
    report = message_batch_send(message_ids=[m.id for m in [*messages, transactional]], token="t")
    get_provider.cache_clear()
    assert report.sent == 5
    subjects = {m["To"]: m["Subject"] for m in smtp_server.handler.messages}
    for message, expected in zip(messages, locales.values(), strict=True):
        assert subjects[message.recipient] == expected
    assert subjects[transactional.recipient] == "Hello Ada"
    assert set(EmailMessage.objects.values_list("status", flat=True)) == {"SENT"}
