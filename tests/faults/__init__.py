"""Test-only app: fault injection for the crash tests, through the product's signals.

Installed only by `tests.fault_settings` (which the tests' subprocesses run with); the production
settings know nothing of it. Each receiver reads its environment variable when it fires, so a
process started without the variable behaves exactly like production:

- `NOTIFIER_FAULT_PAUSE_AFTER_CLAIM` (seconds): a worker holds a claimed batch before rendering
  (`delivery.signals.batch_claimed`).
- `NOTIFIER_FAULT_PAUSE_BEFORE_RENDER` (seconds): a worker holds each message of a claimed
  batch after the send path's checks, before rendering it and before the hand-off mark
  (`delivery.signals.message_rendering`).
- `NOTIFIER_FAULT_CRASH_RECIPIENT` (address): the worker process dies (`os._exit(70)`) rendering
  this recipient, a poison message (`delivery.signals.message_rendering`).
- `NOTIFIER_FAULT_SCHEDULER_PAUSE_AFTER_CLAIM` / `..._AFTER_FENCE` (seconds): the scheduler holds
  a claimed batch before the database fence or before publishing it
  (`scheduling.signals.due_batch_claimed` / `due_batch_fenced`); logs "fault: pausing".

One more is read by tests/fault_settings.py itself, not by a receiver:
`NOTIFIER_FAULT_UNACKED_RESTORE_SECONDS` (how often kombu sweeps the unacked broker messages, for a
test that shortens the visibility timeout: tests/delivery/test_visibility_timeout.py).
"""
