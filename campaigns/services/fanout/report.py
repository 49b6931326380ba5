"""What one fan-out run did (rows written and excluded, tasks published, rows re-published)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FanoutReport:
    inserted: int = 0
    excluded: int = 0
    tasks: int = 0
    republished: int = 0
    finished: bool = False

    def add(self, other: FanoutReport) -> None:
        self.inserted += other.inserted
        self.excluded += other.excluded
        self.tasks += other.tasks
