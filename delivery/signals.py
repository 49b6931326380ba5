"""Extension points of the send path: Django signals sent at fixed steps of a batch.

Nothing in the product connects to them; sending a signal with no receivers costs one attribute
check. Metrics, tracing or tests can connect receivers (the crash tests do: tests/faults/ pauses a
worker after its claim or kills it while it renders a chosen recipient). A receiver runs inside the
worker, in the middle of a claimed batch: it must be quick, and an exception it raises propagates
into the batch (the rows stay claimed until the task is redelivered), so a receiver that must not
disturb sending catches its own errors.

- `batch_claimed`: the batch's rows are taken, nothing is rendered or offered to an ESP yet:
  claimed (SENDING under this task's token), or, on a bulk (P3) batch's first delivery, read
  QUEUED to be claimed and handed over in one write after rendering (decision 59). kwargs:
  `message_ids` (list[int], the ids taken), `token` (str, the claim token). Sender:
  `delivery.services.sending`.
- `message_rendering`: one message is about to be rendered, per recipient, before the hand-off
  mark. kwargs: `message_id` (int), `recipient` (str), `priority` (int). Sender: as above.
"""

from __future__ import annotations

from django.dispatch import Signal

batch_claimed = Signal()
message_rendering = Signal()
