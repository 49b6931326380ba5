"""Consent from the API to the provider (issue 28, decision 106): a recipient who left a topic gets
no broadcast send of it (SUPPRESSED at accept, or at send for a row queued before they left), while
their OTP goes out: an unsubscribe never stops transactional mail.

The sends are made through POST /api/v1/messages; the real send task runs in this process against
the fake ESPs (real PostgreSQL and Redis), for the single-message path (P0) and a batch (P2).
"""

from __future__ import annotations

import uuid

import pytest

from audience.models import ConsentChange, Topic
from audience.services.consent import ConsentSubject, broadcast_unsubscribe, topic_subscription_set
from delivery.models import EmailMessage
from delivery.tasks import send_batch
from templates.services import template_create
from tests import factories
from tests.delivery.conftest import ledger_counts

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "123456"}}
PRIORITIES = {"critical": 0, "normal": 2}


@pytest.fixture
def otp(db):
    return template_create(client=factories.owner(), name="otp", subject="Your code {{ code }}",
                           html_body="<p>Hello {{ name }}, your code is <b>{{ code }}</b></p>")


@pytest.fixture
def digest(db) -> Topic:
    return Topic.objects.create(client=factories.owner(), name="Weekly digest")


@pytest.fixture
def send(api, django_capture_on_commit_callbacks, empty_broker):
    """POST a message (published to the real broker after commit); its id and status."""
    def _send(body: dict) -> tuple[int, str]:
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post("/api/v1/messages", body, format="json")
        assert response.status_code == 202, response.content
        return response.json()["id"], response.json()["status"]
    return _send


def _task(message_id: int, priority: int) -> None:
    """The real send task, run in this process."""
    send_batch.apply(args=([message_id], priority), task_id=uuid.uuid4().hex).get()


def _status(message_id: int) -> str:
    return EmailMessage.objects.get(pk=message_id).status


def _leave(topic: Topic, email: str) -> None:
    topic_subscription_set(subject=ConsentSubject.of(topic.client_id, email), topic=topic, subscribed=False,
                           source=ConsentChange.Source.LINK)


def test_who_left_the_topic_gets_no_newsletter_and_their_otp_is_sent(settings, esps, otp, digest, send):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    _leave(digest, "ada@example.com")
    newsletter_id, newsletter = send({**OTP, "priority": "normal", "stream": "broadcast",
                                      "topic": "Weekly digest"})
    assert newsletter == Status.SUPPRESSED
    otp_id, queued = send(OTP)
    assert queued == Status.QUEUED
    _task(otp_id, 0)
    assert (_status(otp_id), _status(newsletter_id)) == (Status.SENT, Status.SUPPRESSED)
    assert ledger_counts(esps, [otp_id]) == ([], {}, {})
    assert esps["sendgrid"].ledger.count() == 1  # the OTP, and nothing else


@pytest.mark.parametrize("priority", ["critical", "normal"])  # the single-message path, a batch
def test_a_row_queued_before_its_recipient_left_the_topic_is_suppressed_at_send(settings, esps, otp, digest,
                                                                                 send, priority):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    newsletter_id, queued = send({**OTP, "priority": priority, "stream": "broadcast", "topic": digest.pk})
    other_id, _ = send({**OTP, "priority": priority, "stream": "broadcast", "to": "grace@example.com",
                        "topic": digest.pk})
    otp_id, _ = send({**OTP, "priority": priority, "idempotency_key": "otp"})
    assert queued == Status.QUEUED
    _leave(digest, "ada@example.com")  # after the accept, before the send
    for message_id in (newsletter_id, other_id, otp_id):
        _task(message_id, PRIORITIES[priority])
    assert [_status(i) for i in (newsletter_id, other_id, otp_id)] == [Status.SUPPRESSED, Status.SENT,
                                                                        Status.SENT]
    assert ledger_counts(esps, [other_id, otp_id]) == ([], {}, {})
    assert esps["sendgrid"].ledger.count() == 2


def test_leaving_the_broadcast_stream_after_the_accept_stops_broadcast_rows_only(settings, esps, otp, send):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    newsletter_id, _ = send({**OTP, "stream": "broadcast"})
    otp_id, _ = send({**OTP, "idempotency_key": "otp"})
    broadcast_unsubscribe(subject=ConsentSubject.of(factories.owner().pk, "ada@example.com"),
                          source=ConsentChange.Source.LINK)
    for message_id in (newsletter_id, otp_id):
        _task(message_id, 0)
    assert (_status(newsletter_id), _status(otp_id)) == (Status.SUPPRESSED, Status.SENT)
