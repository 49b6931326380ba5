"""A dependency-free progress bar for management commands (one line, redrawn in place)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, total: int, *, label: str = "", stream: TextIO | None = None, width: int = 30):
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.started = time.monotonic()
        self.done = 0

    def update(self, done: int, extra: str = "") -> None:
        self.done = done
        elapsed = max(time.monotonic() - self.started, 1e-6)
        fraction = min(done / self.total, 1.0) if self.total else 1.0
        filled = int(self.width * fraction)
        bar = "#" * filled + "-" * (self.width - filled)
        rate = done / elapsed
        line = f"\r{self.label} [{bar}] {fraction:6.1%} {done:,}/{self.total:,}  {rate:,.0f}/s"
        self.stream.write(line + (f"  {extra}" if extra else "") + "\033[K")
        self.stream.flush()

    def finish(self, extra: str = "") -> None:
        self.update(self.done, extra)
        self.stream.write("\n")
        self.stream.flush()
