"""Whether a service may start new sends: rules other apps register, one DRF permission.

The client is the tenant, so "this client may not send now" is a fact about the client; the
rule that decides it lives above (feedback's reputation guard holds a client whose bounce or
complaint rate is too high). It registers a guard from its `AppConfig.ready()`; the send APIs
(messages, campaigns) list `MaySend` in their permissions and never import feedback.

A client's verdict is remembered by this process for NOTIFIER_SEND_GUARD_CACHE_SECONDS
(decision 53): a new hold or a release reaches every process within those seconds, and the
process that records it at once (the guard's owner calls `send_refusal_forget`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from core.expiring import ExpiringMap


@dataclass(frozen=True)
class Refusal:
    message: str
    code: str


SendGuard = Callable[[int], "Refusal | None"]

_guards: list[SendGuard] = []


def register_send_guard(guard: SendGuard) -> None:
    if guard not in _guards:
        _guards.append(guard)


# str(client id) -> the refusal, or None when it may send
_verdicts: ExpiringMap[str, Refusal | None] = ExpiringMap()


def send_refusal_forget(client_id: int | str | None = None) -> None:
    """Forget this process's verdict on one client (all clients when None)."""
    if client_id is None:
        _verdicts.clear()
    else:
        _verdicts.forget(str(client_id))


def _decide(client_id: int | str) -> Refusal | None:
    for guard in _guards:
        refusal = guard(client_id)
        if refusal is not None:
            return refusal
    return None


def send_refusal(client_id: int | str) -> Refusal | None:
    """The first registered guard's refusal for this client, or None when it may send."""
    return _verdicts.get_or_compute(str(client_id), settings.NOTIFIER_SEND_GUARD_CACHE_SECONDS,
                                    lambda: _decide(client_id))


class MaySend(BasePermission):
    """403 with the guard's message and code when a registered guard refuses the client."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return True  # a held service still reads its messages (GET /api/v1/messages)
        client = getattr(request, "user", None)
        if client is None or not getattr(client, "pk", None):
            return True  # authentication decides; this only judges known clients
        refusal = send_refusal(client.pk)
        if refusal is None:
            return True
        self.message, self.code = refusal.message, refusal.code  # DRF reads both off the instance
        return False
