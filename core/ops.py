"""Shared pieces of the operations commands (import_suppressions, export_events, purge_messages):
a progress bar on stderr and id-keyset batching, so each command is resumable and bounded."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from tqdm import tqdm


def progress(*, total: int | None, desc: str, unit: str = "rows", quiet: bool = False) -> tqdm:
    """A tqdm bar on stderr (stdout stays clean for data and the final summary)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=quiet,
                dynamic_ncols=True, mininterval=0.5)


def id_batches(queryset: QuerySet[Any], *, batch_size: int, after_id: int = 0,
               fields: tuple[str, ...] = ()) -> Iterator[list[Any]]:
    """Walk a queryset in id order, `batch_size` rows at a time, from `after_id` (keyset paging:
    each batch is one indexed range query, however far in; no OFFSET)."""
    last = after_id
    while True:
        page = queryset.filter(id__gt=last).order_by("id")
        rows = list(page.values(*fields)[:batch_size] if fields else page[:batch_size])
        if not rows:
            return
        yield rows
        last = rows[-1]["id"] if fields else rows[-1].id
