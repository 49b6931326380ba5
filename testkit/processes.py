"""Real notifier processes (Celery workers, the scheduler, the web server) started as
subprocesses by the tests and the benchmarks.

Under pytest they see the test database: the environment passed down names the database pytest-django
created, so rows a test commits are the rows a worker claims.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
from django.conf import settings
from django.db import connection

# The repository root, not settings.BASE_DIR: bench/ starts these processes too, and importing
# this module must not need Django configured.
BASE_DIR = Path(__file__).resolve().parents[1]


def database_url() -> str:
    """The URL of the database the tests run on (the test database, after setup)."""
    cfg = connection.settings_dict
    user = cfg.get("USER") or ""
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    socket_dir = (cfg.get("OPTIONS") or {}).get("host")
    if socket_dir:  # the embedded server listens on a unix socket only
        return f"postgres://{auth}/{cfg['NAME']}?host={socket_dir}"
    return f"postgres://{auth}{cfg.get('HOST') or '127.0.0.1'}:{cfg.get('PORT') or 5432}/{cfg['NAME']}"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        NOTIFIER_REDIS_PREFIX=settings.REDIS_KEY_PREFIX,
        NOTIFIER_TASK_EVENTS="false",
        # Status callbacks go to receivers the tests start on 127.0.0.1 (decision 113).
        NOTIFIER_CALLBACKS_ALLOW_LOOPBACK="true",
        PYTHONUNBUFFERED="1",
        # Production settings plus the test-only fault receivers (tests/faults/): inert unless a
        # NOTIFIER_FAULT_* variable is passed in `extra` or set by the test.
        DJANGO_SETTINGS_MODULE="tests.fault_settings",
    )
    env.update(extra)
    return env


class ManagedProcess:
    """A subprocess with its output in a log file, and helpers to wait for and kill it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path):
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> ManagedProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process owns it
        self.process = subprocess.Popen(
            self.argv, cwd=BASE_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, text: str, timeout: float = 30.0, after: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log()[after:]:
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log()[-3000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"{self.name} did not log {text!r}:\n{self.log()[-3000:]}")

    def children(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Signal the process and all its children (its own session), e.g. a crash."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a worker's warm shutdown), then the whole group's SIGKILL after `timeout` s."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill_group()


def celery_worker(role: str, env: dict[str, str], log_dir: Path, concurrency: int = 1) -> ManagedProcess:
    env = {**env, f"NOTIFIER_WORKER_P{_priority_index(role)}_CONCURRENCY": str(concurrency),
           "NOTIFIER_WORKER_NAME": f"{role}-{uuid.uuid4().hex[:8]}@%h"}
    argv = [sys.executable, "-m", "core.worker", role]
    return ManagedProcess(f"worker-{role}", argv, env, log_dir)


def ops_worker(env: dict[str, str], log_dir: Path, concurrency: int = 2) -> ManagedProcess:
    """The ops pool: the status, webhook and maintenance queues (fan-outs, webhook processing)."""
    env = {**env, "NOTIFIER_WORKER_OPS_CONCURRENCY": str(concurrency)}
    return ManagedProcess("worker-ops", [sys.executable, "-m", "core.worker", "ops"], env, log_dir)


def callbacks_worker(env: dict[str, str], log_dir: Path, concurrency: int = 4) -> ManagedProcess:
    """The callbacks pool: status callbacks posted to the services' receivers (threads)."""
    env = {**env, "NOTIFIER_WORKER_CALLBACKS_CONCURRENCY": str(concurrency),
           "NOTIFIER_WORKER_NAME": f"callbacks-{uuid.uuid4().hex[:8]}@%h"}
    argv = [sys.executable, "-m", "core.worker", "callbacks"]
    return ManagedProcess("worker-callbacks", argv, env, log_dir)


def scheduler(env: dict[str, str], log_dir: Path, name: str = "scheduler") -> ManagedProcess:
    argv = [sys.executable, "manage.py", "run_scheduler", "--interval", "0.5"]
    return ManagedProcess(name, argv, env, log_dir)


def _priority_index(role: str) -> int:
    return {"critical": 0, "high": 1, "normal": 2, "low": 3}[role]


def procfile_command(name: str) -> str:
    """The command line of one Procfile process (`web: granian ...` -> "granian ...")."""
    for line in (BASE_DIR / "Procfile").read_text().splitlines():
        process, _, command = line.partition(":")
        if process.strip() == name:
            return command.strip()
    raise LookupError(f"no {name!r} process in the Procfile")


def procfile_process(name: str, env: dict[str, str], log_dir: Path, label: str = "") -> ManagedProcess:
    """One Procfile process exactly as its line runs it.

    Through sh, as honcho runs it (`$PORT`, `${VAR:-default}` expand), with `exec env` so that
    the line's own command, after its leading `VAR=value` assignments, is the process a test
    signals and a benchmark measures. The virtualenv's bin comes first on PATH.
    """
    env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    argv = ["/bin/sh", "-c", f"exec env {procfile_command(name)}"]
    return ManagedProcess(label or name, argv, env, log_dir)


def web_server(env: dict[str, str], log_dir: Path, port: int, workers: int = 1) -> ManagedProcess:
    """The API served exactly as the Procfile's `web` line serves it, on `port`."""
    env = {**env, "PORT": str(port), "WEB_CONCURRENCY": str(workers)}
    return procfile_process("web", env, log_dir, label=f"web-{port}")

