"""manage.py purge_messages: only old messages in a final state go, in batches; a dry run counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import DeliveryAttempt, EmailMessage
from tests.factories import email_message, template_version
from tests.support.commands import command_run

pytestmark = pytest.mark.django_db


def test_purge_messages_deletes_only_old_final_messages_in_batches():
    version = template_version()
    old = timezone.now() - timedelta(days=40)
    final = [email_message(version=version, status=status) for status in ("SENT", "FAILED", "DELIVERED")]
    in_flight = [email_message(version=version, status=status) for status in ("QUEUED", "SENDING",
                                                                              "AMBIGUOUS")]
    recent = email_message(version=version, status="SENT")
    EmailMessage.objects.filter(id__in=[m.id for m in final + in_flight]).update(created_at=old)
    DeliveryAttempt.objects.create(message=final[0], provider="smtp", outcome="accepted")
    out, _ = command_run("purge_messages", "--older-than", "30", "--dry-run")
    assert "would purge 3" in out and EmailMessage.objects.count() == 7
    out, _ = command_run("purge_messages", "--older-than", "30", "--batch-size", "2")
    assert "purged 3 messages" in out
    remaining = set(EmailMessage.objects.values_list("id", flat=True))
    assert remaining == {m.id for m in in_flight} | {recent.id}
    assert not DeliveryAttempt.objects.exists()
    out, _ = command_run("purge_messages", "--older-than", "30")            # rerun: nothing left
    assert "purged 0 messages" in out
