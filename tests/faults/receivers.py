"""Receivers that turn NOTIFIER_FAULT_* environment variables into pauses and crashes."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from delivery import signals as delivery_signals
from scheduling import signals as scheduling_signals

logger = logging.getLogger(__name__)
CRASH_EXIT_CODE = 70


def _seconds(variable: str) -> float:
    return float(os.environ.get(variable) or 0)


def _pause(variable: str, what: str, message_ids: list[int]) -> None:
    seconds = _seconds(variable)
    if seconds > 0:
        logger.warning("fault: pausing %.1fs after %s of %d ids", seconds, what, len(message_ids))
        time.sleep(seconds)


def pause_after_claim(sender: Any, *, message_ids: list[int], **_: Any) -> None:
    _pause("NOTIFIER_FAULT_PAUSE_AFTER_CLAIM", "claim", message_ids)


def pause_before_render(sender: Any, *, message_id: int, **_: Any) -> None:
    # After the send path's own checks of the claimed rows, before rendering and the hand-off
    # mark: the latest moment a receiver can hold a message before its provider call.
    _pause("NOTIFIER_FAULT_PAUSE_BEFORE_RENDER", "the checks, before rendering", [message_id])


def crash_on_recipient(sender: Any, *, recipient: str, **_: Any) -> None:
    crash = os.environ.get("NOTIFIER_FAULT_CRASH_RECIPIENT", "")
    if crash and recipient == crash:
        os._exit(CRASH_EXIT_CODE)  # a poison message that kills its process


def scheduler_pause_after_claim(sender: Any, *, message_ids: list[int], **_: Any) -> None:
    _pause("NOTIFIER_FAULT_SCHEDULER_PAUSE_AFTER_CLAIM", "claim", message_ids)


def scheduler_pause_after_fence(sender: Any, *, message_ids: list[int], **_: Any) -> None:
    _pause("NOTIFIER_FAULT_SCHEDULER_PAUSE_AFTER_FENCE", "fence", message_ids)


def connect() -> None:
    delivery_signals.batch_claimed.connect(pause_after_claim, dispatch_uid="fault-pause-after-claim")
    delivery_signals.message_rendering.connect(crash_on_recipient, dispatch_uid="fault-crash-recipient")
    delivery_signals.message_rendering.connect(pause_before_render, dispatch_uid="fault-pause-before-render")
    scheduling_signals.due_batch_claimed.connect(
        scheduler_pause_after_claim, dispatch_uid="fault-scheduler-pause-after-claim"
    )
    scheduling_signals.due_batch_fenced.connect(
        scheduler_pause_after_fence, dispatch_uid="fault-scheduler-pause-after-fence"
    )
