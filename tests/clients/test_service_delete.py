"""Deleting a service (its content removed first: templates, contacts, lists and topics are
PROTECTed) takes its broadcast unsubscribes with it and keeps every all-streams suppression."""

from __future__ import annotations

import pytest

from audience.models import Suppression
from clients.models import Service
from clients.services import service_create

pytestmark = pytest.mark.django_db


def test_a_deleted_services_broadcast_unsubscribes_go_and_its_bounces_stay():
    (service, _), (other, _) = service_create(name="leaving"), service_create(name="staying")
    Suppression.objects.create(email="left@example.com", scope="broadcast", client=service,
                               reason="unsubscribe")
    Suppression.objects.create(email="left@example.com", scope="broadcast", client=other,
                               reason="unsubscribe")
    Suppression.objects.create(email="bounced@example.com", scope="all", client=service,
                               reason="hard_bounce")

    Service.objects.filter(pk=service.pk).delete()

    rows = sorted(Suppression.objects.values_list("email", "scope", "client_id"))
    assert rows == [("bounced@example.com", "all", None), ("left@example.com", "broadcast", other.pk)]


def test_deleting_one_instance_applies_the_same_rule():
    service, _ = service_create(name="leaving")
    Suppression.objects.create(email="left@example.com", scope="broadcast", client=service)
    Suppression.objects.create(email="bounced@example.com", scope="all", client=service)
    service.delete()
    assert list(Suppression.objects.values_list("email", "client_id")) == [("bounced@example.com", None)]
