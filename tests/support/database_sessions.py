"""The sessions other than this process's own on the test database, when the test session ends.

pytest-django drops the test database after the last test; a session some thread, event loop or
process left open makes the DROP fail after PostgreSQL's own 5 s wait, and the database stays on
the server with only a warning ("is being accessed by other users"). tests/conftest.py checks
before that drop and fails naming the sessions left open.
"""

from __future__ import annotations

import time

from django.db import connection, connections

# PostgreSQL's DROP DATABASE waits this long for other sessions to end (CountOtherDBBackends):
# a process stopped a moment ago still has its backends exiting.
DROP_WAIT_SECONDS = 5.0
_OTHER_SESSIONS = (
    "SELECT pid, application_name, backend_start, state, left(query, 200) FROM pg_stat_activity "
    "WHERE datname = %s AND pid <> pg_backend_pid() ORDER BY backend_start"
)


def sessions_left_on_test_database(wait_seconds: float = DROP_WAIT_SECONDS) -> list[str]:
    """The sessions still on the test database once this thread's connections are closed (as
    Django closes them before the drop), each as a line; empty if they all end within
    `wait_seconds`."""
    if connection.vendor != "postgresql":
        return []
    connections.close_all()
    database = connection.settings_dict["NAME"]
    deadline = time.monotonic() + wait_seconds
    while True:
        with connection._nodb_cursor() as cursor:
            cursor.execute(_OTHER_SESSIONS, [database])
            rows = cursor.fetchall()
        if not rows or time.monotonic() >= deadline:
            return [_described(database, *row) for row in rows]
        time.sleep(0.1)


def _described(database: str, pid: int, application: str, started, state: str, query: str) -> str:
    return (f"{database}: pid {pid} application_name={application!r} since {started:%H:%M:%S} "
            f"{state}, last query: {query}")
