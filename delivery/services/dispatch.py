"""Hand message ids to their priority's Celery queue, in batches of that priority's size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from core.priorities import Priority, batch_size_for, queue_for
from core.task_publish import tasks_publish


def messages_enqueue(
    *, message_ids: Sequence[int], priority: Priority | int, countdown: float = 0, attempt: int = 0,
    pinned: str = "",
) -> int:
    """Publish one send task per batch, all in one broker round trip on the direct Redis path;
    returns the number of tasks published. `pinned`: the one provider the tasks may use."""
    size = batch_size_for(priority)
    # The pin only when there is one: every other task keeps its three arguments.
    extra = (pinned,) if pinned else ()
    batches = [(list(message_ids[start:start + size]), int(priority), attempt, *extra)
               for start in range(0, len(message_ids), size)]
    return tasks_publish("delivery.send_batch", args_list=batches, queue=queue_for(priority),
                         countdown=countdown)


def messages_enqueue_by_priority(pairs: Iterable[tuple[int, int]]) -> int:
    """Enqueue (id, priority) pairs, grouped per priority."""
    grouped: dict[int, list[int]] = defaultdict(list)
    for message_id, priority in pairs:
        grouped[priority].append(message_id)
    return sum(messages_enqueue(message_ids=ids, priority=p) for p, ids in grouped.items())
