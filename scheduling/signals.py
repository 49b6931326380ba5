"""Extension points of the scheduler's dispatch: Django signals sent at fixed steps of a batch.

Nothing in the product connects to them; sending a signal with no receivers costs one attribute
check. Metrics, tracing or tests can connect receivers (the scheduler crash tests do: tests/faults/
holds a claimed batch to let its lease run out). Receivers run inside the scheduler loop while it
holds a lease on the batch: keep them quick; an exception propagates to the loop.

- `due_batch_claimed`: due ids were claimed from the Redis due set (leased, not yet fenced in the
  database). kwargs: `message_ids` (list[int]), `lease_deadline` (float, epoch seconds).
- `due_batch_fenced`: the database fence moved the claimed rows SCHEDULED -> QUEUED; they are not
  published to the broker yet. kwargs: `message_ids` (list[int], the fenced rows),
  `lease_deadline` (float). Sender of both: `scheduling.services.dispatcher`.
"""

from __future__ import annotations

from django.dispatch import Signal

due_batch_claimed = Signal()
due_batch_fenced = Signal()
