"""Shared pieces of the operations commands (imports, exports, purges, rebuilds, the demo
campaign): one progress display on stderr and id-keyset batching, so each command is resumable
and bounded."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from django.db.models import QuerySet
from tqdm import tqdm

# Not a terminal (a pipe, a log file, CI): one plain line this often, plus the last one. A
# redrawn line there is a stream of carriage returns, one "line" per update.
PLAIN_INTERVAL_SECONDS = 10.0
# The size of a terminal that reports none (a pseudo-terminal nobody sized, e.g. `script`
# without a terminal): tqdm would fit the bar into 0 columns and rows, i.e. draw nothing.
UNSIZED_TERMINAL = {"ncols": 80, "nrows": 24}
PLAIN_FORMAT = ("{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} {unit} "
                "[{elapsed}<{remaining}, {rate_fmt}{postfix}]")
PLAIN_FORMAT_NO_TOTAL = "{desc}: {n_fmt} {unit} [{elapsed}, {rate_fmt}{postfix}]"


class Progress(tqdm):
    """A tqdm bar with what the commands add: a jump to an absolute count (the importers and the
    demo campaign report totals, not steps) and a note printed above the bar."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stream: TextIO = kwargs.get("file") or sys.stderr  # tqdm keeps none when disabled
        super().__init__(*args, **kwargs)

    def advance_to(self, done: int) -> None:
        self.update(done - self.n)

    def note(self, message: str) -> None:
        """A line of its own (e.g. "committed through line N") that does not break the bar."""
        self.write(message, file=self.stream)


class PlainProgress(Progress):
    """The same figures as whole lines: no carriage return, no cursor movement."""

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if msg == "":  # tqdm clearing its line: a plain stream has none
            return False
        self.fp.write(f"{self if msg is None else msg}\n")
        self.fp.flush()
        return True

    def clear(self, nolock: bool = False) -> None:
        """Nothing drawn in place, so nothing to take back."""

    def note(self, message: str) -> None:
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if not self.disable and self.n != self.last_print_n:
            self.display()  # the final figures, unless the last line already showed them
        super().close()


def progress(*, total: int | None, desc: str, unit: str = "rows", quiet: bool = False,
             stream: TextIO | None = None) -> Progress:
    """A progress display on `stream` (default stderr; stdout stays clean for data and the final
    summary). On a terminal one line redrawn in place; otherwise a plain line every
    PLAIN_INTERVAL_SECONDS. Give it the raw stream, never a command's `self.stderr`: Django's
    wrapper ends every write with a newline and colours it red on a terminal."""
    stream = stream or sys.stderr
    if _is_terminal(stream):
        size = {"dynamic_ncols": True} if _columns(stream) else UNSIZED_TERMINAL
        return Progress(total=total, desc=desc, unit=unit, file=stream, disable=quiet,
                        mininterval=0.5, **size)
    return PlainProgress(total=total, desc=desc, unit=unit, file=stream, disable=quiet, leave=False,
                         mininterval=PLAIN_INTERVAL_SECONDS,
                         bar_format=PLAIN_FORMAT if total is not None else PLAIN_FORMAT_NO_TOTAL)


def command_stderr(options: dict[str, Any]) -> TextIO:
    """The raw stream behind a command's `self.stderr` (`call_command(stderr=...)` or sys.stderr)."""
    return options.get("stderr") or sys.stderr


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _columns(stream: TextIO) -> int:
    """The terminal's width, 0 when it reports none."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return os.get_terminal_size(stream.fileno()).columns
    return 0


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
