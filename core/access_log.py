"""The web server's access log without the requests nobody reads (the Procfile's `web`).

granian logs each request through the `granian.access` logger with the request's fields as the
record's arguments; core/access_log.json (granian's `--log-config`) puts this filter on it. A
successful request for a static file, the dashboard's poll (every 2 s per open dashboard) or a
health probe is dropped: under `make run` they were most of the log. Anything answered 400 or
above is still logged, and so is every API call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

QUIET_PREFIXES = ("/static/",)
QUIET_PATHS = frozenset({"/favicon.ico", "/healthz", "/dashboard/data.json"})


def is_quiet(path: str, status: int) -> bool:
    """True for a request the access log leaves out."""
    return status < 400 and (path in QUIET_PATHS or path.startswith(QUIET_PREFIXES))


class QuietAccessLog(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        fields = record.args if isinstance(record.args, Mapping) else {}
        return not is_quiet(str(fields.get("path", "")), int(fields.get("status") or 0))
