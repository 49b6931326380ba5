"""The ledger's final marks record their outcome once (decision 115): a failed send
message.failed, a dead-lettered one message.dead_lettered, a row withheld at the send
message.suppressed, an AMBIGUOUS hold nothing, a reconciled hand-off message.sent; a mark that
loses its race (another token, or run again) records nothing."""

from __future__ import annotations

import uuid

import pytest

from delivery.models import EmailMessage
from delivery.services import ledger
from delivery.services.dead_letters import messages_dead_letter
from eventlog.models import RecordedEventTypes, ServiceEvent
from eventlog.types import ALL_EVENT_TYPES
from tests import factories

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status


def _claimed(count: int) -> tuple[list[int], str]:
    owner = factories.owner()
    version = factories.template_version()
    ids = [factories.email_message(version=version, client=owner).id for _ in range(count)]
    token = uuid.uuid4().hex
    assert len(ledger.messages_claim(message_ids=ids, token=token)) == count
    return ids, token


def _types() -> list[tuple[int, str]]:
    return sorted(ServiceEvent.objects.values_list("message_id", "type"))


def test_each_final_outcome_records_its_event_once():
    RecordedEventTypes.objects.create(service=factories.owner(), types=list(ALL_EVENT_TYPES))
    (failed, suppressed, ambiguous, dead), token = _claimed(4)
    for _ in range(2):  # the second run finds nothing SENDING under the token: no event again
        ledger.messages_mark_final(message_ids=[failed], token=token, status=Status.FAILED, error="550 no")
        ledger.messages_mark_final(message_ids=[suppressed], token=token, status=Status.SUPPRESSED,
                                   error="suppressed")
        ledger.messages_mark_final(message_ids=[ambiguous], token=token, status=Status.AMBIGUOUS,
                                   error="timeout")
        messages_dead_letter(message_ids=[dead], token=token, error="every attempt failed")
    assert ledger.messages_mark_final(message_ids=[ambiguous], token="other", status=Status.FAILED,
                                      error="x") == 0
    assert _types() == sorted([(failed, "message.failed"), (suppressed, "message.suppressed"),
                               (dead, "message.dead_lettered")])
    assert ServiceEvent.objects.get(message_id=failed).data["error"] == "550 no"
    # The AMBIGUOUS hold, settled by the ESP's evidence: sent, once.
    for _ in range(2):
        ledger.handed_over_message_mark_sent(message_id=ambiguous, provider="smtp",
                                             provider_message_id="pm-1", error="")
    assert ServiceEvent.objects.filter(message_id=ambiguous, type="message.sent").count() == 1


def test_a_service_that_records_only_some_types_gets_only_those():
    RecordedEventTypes.objects.create(service=factories.owner(), types=["message.dead_lettered"])
    (failed, dead), token = _claimed(2)
    ledger.messages_mark_final(message_ids=[failed], token=token, status=Status.FAILED, error="550")
    messages_dead_letter(message_ids=[dead], token=token, error="gone")
    assert _types() == [(dead, "message.dead_lettered")]


def test_a_test_keys_message_is_told_apart():
    RecordedEventTypes.objects.create(service=factories.owner(), types=list(ALL_EVENT_TYPES))
    (live, sandboxed), token = _claimed(2)
    EmailMessage.objects.filter(pk=sandboxed).update(key_type="test")
    ledger.messages_mark_final(message_ids=[live, sandboxed], token=token, status=Status.FAILED, error="x")
    flags = dict(ServiceEvent.objects.values_list("message_id", "data__test"))
    assert flags == {live: False, sandboxed: True}
