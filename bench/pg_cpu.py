"""CPU time of the PostgreSQL backends serving one database, sampled from /proc (psutil).

The machine's PostgreSQL serves several databases (other engineers' benchmarks): the postmaster
tree's CPU mixes them. A backend's command line names its database ("postgres: user db host"),
so a sampler thread reads utime + stime of every backend of ours every `interval` seconds and
keeps each one's last value; a backend that exits between two samples loses at most `interval`
of its CPU (the fan-out's and the workers' connections live for the whole run).

    with BackendCpu("notifier_fanout") as pg:
        ...
    print(pg.seconds)
"""

from __future__ import annotations

import threading

import psutil


class BackendCpu:
    def __init__(self, database: str, interval: float = 0.2):
        self.marker = f" {database} "
        self.interval = interval
        self.seen: dict[int, float] = {}
        self.before: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-cpu-sampler", daemon=True)

    def _sample(self) -> dict[int, float]:
        found = {}
        for proc in psutil.process_iter(["name", "cmdline"]):
            try:
                line = " ".join(proc.info["cmdline"] or []) + " "
                if line.startswith("postgres") and self.marker in line:
                    found[proc.pid] = sum(proc.cpu_times()[:2])
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.seen.update(self._sample())

    def __enter__(self) -> BackendCpu:
        self.before = self._sample()
        self.seen.update(self.before)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seen.update(self._sample())

    @property
    def seconds(self) -> float:
        """CPU seconds our backends used inside the block."""
        return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.seen.items())
