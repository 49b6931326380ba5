"""The sandbox's simulated ESP events (issue 27), fed through the same path as a webhook's.

The delivery app's sandbox (delivery/services/sandbox.py) settles a test key's message without
any ESP and reports each accepted one here (`delivery.extensions.sandbox_events_report`). What
an ESP would report later (delivered, a bounce, a complaint) is published as one task per step,
`NOTIFIER_SANDBOX_EVENT_DELAY_SECONDS` apart, on the webhook queue; each builds the step's
normalised events and applies them with `events_process`, as a webhook delivery's: EmailEvent
rows, marks, statuses, counters and suppressions (in the test key's scope: services/suppression.py).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils import timezone

from core.priorities import WEBHOOK_QUEUE
from core.task_publish import tasks_publish
from delivery.services.sandbox import sandbox_event, sandbox_event_steps
from feedback.services.processing import ProcessReport, events_process

logger = logging.getLogger(__name__)
TASK_NAME = "feedback.process_sandbox_events"


def sandbox_events_schedule(accepted: list[tuple[int, str]]) -> int:
    """Publish each step's events of these accepted test messages ((id, recipient) pairs), step
    n after n delays; returns the tasks published. A broker that refuses loses only simulated
    events (the message stays SENT, as when an ESP's webhook is lost): logged, never raised into
    the send path that has already recorded the acceptance."""
    steps = max((sandbox_event_steps(recipient) for _, recipient in accepted), default=0)
    delay = settings.NOTIFIER_SANDBOX_EVENT_DELAY_SECONDS
    published = 0
    for step in range(1, steps + 1):
        items = [[pk, recipient] for pk, recipient in accepted if sandbox_event_steps(recipient) >= step]
        try:
            published += tasks_publish(TASK_NAME, args_list=[(items, step)], queue=WEBHOOK_QUEUE,
                                       countdown=delay * step)
        except Exception:
            logger.exception("could not publish sandbox events (step %d) of %d messages", step, len(items))
    return published


def sandbox_events_apply(*, items: list[list], step: int) -> ProcessReport:
    """Step `step`'s events of these test messages, processed as a webhook's batch."""
    now = timezone.now()
    events = [sandbox_event(message_id=int(pk), recipient=recipient, step=step, at=now)
              for pk, recipient in items]
    return events_process(events=[event for event in events if event is not None])
