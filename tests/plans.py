"""What tests read in an EXPLAIN."""

from __future__ import annotations

import re


def plan_sorts(plan: str) -> bool:
    """A Sort node, not a Merge Append's "Sort Key" (which merges partitions already in order)."""
    return re.search(r"(^|-> +)(Incremental )?Sort  \(", plan, re.MULTILINE) is not None
