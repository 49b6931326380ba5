"""Settings for the processes the tests start: production settings plus the fault-injection app.

`testkit.processes.subprocess_env` runs every test subprocess with this module; without a
NOTIFIER_FAULT_* variable in its environment the receivers do nothing (tests/faults/).

`NOTIFIER_FAULT_UNACKED_RESTORE_SECONDS`: how often kombu's Redis transport sweeps its `unacked`
set for messages held past the visibility timeout and puts them back on their queue. kombu's
default is a scan every 10 s x 10 calls (~100 s), fine beside the production timeout of an
hour; a test that shortens the timeout to a few seconds (F3) shortens the sweep with it, so the
redelivery the timeout causes happens within the test, not a minute and a half later.
"""

import os

from notifier.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.faults"]  # noqa: F405

_restore_seconds = os.environ.get("NOTIFIER_FAULT_UNACKED_RESTORE_SECONDS")
if _restore_seconds:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        "unacked_restore_interval": float(_restore_seconds),
        "unacked_restore_throttle": 1,
    }
