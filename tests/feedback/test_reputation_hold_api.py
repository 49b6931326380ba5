"""An API client the reputation guard holds cannot send until an operator releases it."""

import pytest
from django.utils import timezone

from clients.models import Service
from delivery.models import EmailMessage
from feedback.models import ReputationHold

pytestmark = pytest.mark.django_db
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "1"}}


def _hold(client: Service) -> ReputationHold:
    return ReputationHold.objects.create(
        scope=ReputationHold.Scope.CLIENT, client=client, metric="bounce_rate", rate=0.1,
        threshold=0.02, sample=500, reason="held in test")


def test_held_client_gets_403_and_nothing_is_written(api, otp_template):
    hold = _hold(Service.objects.get())
    response = api.post("/api/v1/messages", OTP, format="json")
    assert response.status_code == 403
    assert "reputation hold" in response.json()["error"]["message"]
    assert not EmailMessage.objects.exists()
    hold.released_at = timezone.now()
    hold.save()
    assert api.post("/api/v1/messages", OTP, format="json").status_code == 202
