"""DRF permission: refuse new sends from an API client the reputation guard holds."""

from __future__ import annotations

from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from feedback.services.reputation import client_on_hold


class NotOnReputationHold(BasePermission):
    message = ("This API client is on a reputation hold (bounce or complaint rate over the "
               "threshold); an operator must release it in the admin before it can send again.")
    code = "reputation_hold"

    def has_permission(self, request: Request, view: APIView) -> bool:
        client = getattr(request, "user", None)
        if client is None or not getattr(client, "pk", None):
            return True  # authentication decides; this only judges known clients
        return not client_on_hold(client_id=str(client.pk))
