"""What tests read in an EXPLAIN."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.db import connection


def plan_sorts(plan: str) -> bool:
    """A Sort node, not a Merge Append's "Sort Key" (which merges partitions already in order)."""
    return re.search(r"(^|-> +)(Incremental )?Sort  \(", plan, re.MULTILINE) is not None


def statements_of(call: Callable[[], object]) -> list[tuple[str, object]]:
    """Every (sql, params) `call` runs on the default connection, in order (to EXPLAIN after)."""
    statements: list[tuple[str, object]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    return statements
