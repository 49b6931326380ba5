"""A template that blows a render budget fails its messages at send time; the worker stays small."""

from __future__ import annotations

import uuid

import psutil
import pytest

from delivery.models import EmailMessage
from delivery.services.sending import message_batch_send
from tests.factories import email_message, template_version

pytestmark = pytest.mark.django_db

HOSTILE = ["{{ lipsum(10**6) }}", "{{ ('a\\n' * 10000)|indent(20000) }}",
           "{{ range(5000)|join('y' * 50000) }}", "{{ ('x' * 100000)|replace('', 'y' * 2000) }}"]


@pytest.mark.parametrize("html", HOSTILE)
def test_a_render_over_budget_is_a_failed_message_and_the_process_keeps_its_size(settings, esps, html):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    version = template_version(html_body=html)
    message = email_message(version=version)
    rss_before = psutil.Process().memory_info().rss
    report = message_batch_send(message_ids=[message.id], token=uuid.uuid4().hex)
    message.refresh_from_db()
    assert report.failed == 1
    assert message.status == EmailMessage.Status.FAILED
    assert "render failed" in message.error and "over" in message.error
    assert psutil.Process().memory_info().rss - rss_before < 64 * 1024 * 1024
