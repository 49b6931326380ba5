"""Environment variables that were renamed: the old name keeps working, with a warning.

Our own settings carry the `NOTIFIER_` prefix (docs/contributing.md, "Naming"); these seven did
not, and `FLOWER_URL` sat in Flower's own namespace (Flower takes every `FLOWER_*` variable as an
option and exits on one it does not know). `adopt_renamed_variables` runs before the settings
read anything: an old name set alone is copied to its new name; the new name wins when both are
set. Remove an entry (and its README line) once deployments have moved.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import MutableMapping

# old name -> new name
RENAMED: dict[str, str] = {
    "SMTP_TIMEOUT_SECONDS": "NOTIFIER_SMTP_TIMEOUT_SECONDS",
    "SENDGRID_MAX_REQUEST_BYTES": "NOTIFIER_SENDGRID_MAX_REQUEST_BYTES",
    "MAILGUN_MAX_REQUEST_BYTES": "NOTIFIER_MAILGUN_MAX_REQUEST_BYTES",
    "ESP_CONNECT_TIMEOUT_SECONDS": "NOTIFIER_ESP_CONNECT_TIMEOUT_SECONDS",
    "ESP_READ_TIMEOUT_SECONDS": "NOTIFIER_ESP_READ_TIMEOUT_SECONDS",
    "ESP_POOL_SIZE": "NOTIFIER_ESP_POOL_SIZE",
    "FLOWER_URL": "NOTIFIER_FLOWER_URL",
}


def adopt_renamed_variables(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Copy each old name set alone to its new name; warn for every old name set. Returns them.

    FutureWarning, not DeprecationWarning: Python hides the latter outside `__main__`, and this
    one is for the operator who set the variable, not for a developer.
    """
    found = [old for old in RENAMED if old in environ]
    for old in found:
        new = RENAMED[old]
        if new in environ:
            message = f"{old} is ignored: {new} is set (docs/contributing.md, Naming)"
        else:
            environ[new] = environ[old]
            message = f"{old} is deprecated: set {new} instead (docs/contributing.md, Naming)"
        warnings.warn(message, FutureWarning, stacklevel=2)
    return found
