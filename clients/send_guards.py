"""Whether an API client may start new sends: rules other apps register, one DRF permission.

The client is the tenant, so "this client may not send now" is a fact about the client; the
rule that decides it lives above (feedback's reputation guard holds a client whose bounce or
complaint rate is too high). It registers a guard from its `AppConfig.ready()`; the send APIs
(messages, campaigns) list `MaySend` in their permissions and never import feedback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView


@dataclass(frozen=True)
class Refusal:
    message: str
    code: str


SendGuard = Callable[[int], "Refusal | None"]

_guards: list[SendGuard] = []


def register_send_guard(guard: SendGuard) -> None:
    if guard not in _guards:
        _guards.append(guard)


def send_refusal(client_id: int) -> Refusal | None:
    """The first registered guard's refusal for this client, or None when it may send."""
    for guard in _guards:
        refusal = guard(client_id)
        if refusal is not None:
            return refusal
    return None


class MaySend(BasePermission):
    """403 with the guard's message and code when a registered guard refuses the client."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        client = getattr(request, "user", None)
        if client is None or not getattr(client, "pk", None):
            return True  # authentication decides; this only judges known clients
        refusal = send_refusal(client.pk)
        if refusal is None:
            return True
        self.message, self.code = refusal.message, refusal.code  # DRF reads both off the instance
        return False
