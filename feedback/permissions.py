"""The reputation guard's say in who may send, registered with clients.send_guards."""

from __future__ import annotations

from clients.send_guards import Refusal, send_refusal_forget
from feedback.models import ReputationHold
from feedback.services.reputation import client_on_hold

HOLD_REFUSAL = Refusal(
    message=("This service is on a reputation hold (bounce or complaint rate over the "
             "threshold); an operator must release it in the admin before it can send again."),
    code="reputation_hold",
)


def reputation_hold_refusal(client_id: int) -> Refusal | None:
    return HOLD_REFUSAL if client_on_hold(client_id=str(client_id)) else None


def forget_client_verdict(sender: type, instance: ReputationHold, **kwargs: object) -> None:
    """post_save/post_delete receiver: the held (or released) client is judged again."""
    if instance.client_id is not None:
        send_refusal_forget(instance.client_id)
