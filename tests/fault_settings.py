"""Settings for the processes the tests start: production settings plus the fault-injection app.

`testkit.processes.subprocess_env` runs every test subprocess with this module; without a
NOTIFIER_FAULT_* variable in its environment the receivers do nothing (tests/faults/).
"""

from notifier.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.faults"]  # noqa: F405
