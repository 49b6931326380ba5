"""`make run` as a new user meets it: `python -m devtools.run` on a fresh, empty var directory.

It must boot the embedded PostgreSQL and Redis, the SMTP sink and every Procfile process, print
its curl banner only once the API answers and after a short start-up log (no Celery banner per
worker), deliver the banner's email as one .eml file with a readable .txt beside it, and on
Ctrl-C stop everything it started, saying each process "stopped": no process and no embedded
server may outlive it.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import requests

from devtools.embedded import embedded_postgres, embedded_redis
from testkit.ports import free_port
from testkit.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BASE_DIR = Path(__file__).resolve().parents[2]
# The launcher itself waits up to 120 s for readiness; on a busy 2-core machine initdb and ten
# processes booting at once take a while, so the test allows a little more.
BANNER_TIMEOUT_SECONDS = 150.0
MAIL_TIMEOUT_SECONDS = 15.0
EXIT_TIMEOUT_SECONDS = 60.0
# A duplicate delivery would land right after the first one: watch the mail dir a moment longer.
DUPLICATE_GRACE_SECONDS = 2.0
# Lines printed before the banner: 275 before issue 31 (a 30-line Celery banner per worker, the
# access log of every health probe, Flower's task list); about 30 since.
START_UP_LINES_MAX = 60
# Set by the test session or a developer's shell; with any of them the launcher would use an
# external service instead of starting its own.
_EXTERNAL_SERVICES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SMTP_HOST")


@dataclass(frozen=True)
class Launcher:
    process: subprocess.Popen
    var_dir: Path
    log_path: Path
    port: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self) -> str:
        return self.log()[-4000:]


@pytest.fixture
def var_dir() -> Iterator[Path]:
    # Short on purpose: the Redis and PostgreSQL unix sockets live under it (< 100 bytes).
    path = Path(tempfile.mkdtemp(prefix="nl-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)  # as root this removes embedded_postgres's files too


def _launcher_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _EXTERNAL_SERVICES}
    env.update(
        NOTIFIER_VAR_DIR=str(var_dir),
        PORT=str(free_port()),
        SMTP_PORT=str(free_port()),
        FLOWER_PORT=str(free_port()),
        NOTIFIER_WORKER_SCALE="0.05",  # one or two children per pool: the machine has 2 cores
        PYTHONUNBUFFERED="1",  # the banner must reach the log file when printed
    )
    return env


def _start_launcher(var_dir: Path, log_path: Path) -> Launcher:
    env = _launcher_env(var_dir)
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.run"], cwd=BASE_DIR, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,  # its own group, as a shell job
        )
    return Launcher(process, var_dir, log_path, int(env["PORT"]))


def _wait_for_banner(launcher: Launcher) -> None:
    deadline = time.monotonic() + BANNER_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if "curl" in launcher.log():
            return
        if launcher.process.poll() is not None:
            pytest.fail(f"the launcher exited ({launcher.process.returncode}) before its banner:\n"
                        f"{launcher.tail()}")
        time.sleep(0.2)
    pytest.fail(f"no banner within {BANNER_TIMEOUT_SECONDS:.0f} s:\n{launcher.tail()}")


def _healthz_status(port: int) -> int:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code
    except requests.RequestException:
        return 0


def _send_banner_email(port: int, key: str, code: str) -> requests.Response:
    """What the banner's curl command does."""
    body = {"to": "you@example.com", "template": "welcome", "priority": "critical",
            "context": {"name": "Ada", "code": code}}
    return requests.post(f"http://127.0.0.1:{port}/api/v1/messages", json=body,
                         headers={"Authorization": f"Api-Key {key}"}, timeout=10)


def _eml_text(path: Path) -> str:
    """Headers and decoded bodies: the raw file may carry the code base64 or QP encoded."""
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    parts = [str(message["Subject"])]
    parts += [part.get_content() for part in message.walk() if part.get_content_maintype() == "text"]
    return "\n".join(parts)


def _emails_with(mail_dir: Path, code: str) -> list[Path]:
    # The sink writes ".<name>.part" and renames it: only finished *.eml files count.
    return [p for p in sorted(mail_dir.glob("*.eml")) if code in _eml_text(p)]


def _is_ours(process: psutil.Process, var_dir: Path, group: int) -> bool:
    """Started by this launcher: runs in its group/session, or names its var dir."""
    marker = str(var_dir)
    with contextlib.suppress(psutil.Error, ProcessLookupError):
        if process.pid == os.getpid() or process.status() == psutil.STATUS_ZOMBIE:
            return False
        if group in (os.getpgid(process.pid), os.getsid(process.pid)):
            return True
        if any(marker in arg for arg in process.cmdline()):
            return True
        # Honcho's processes run in sessions of their own and the servers daemonise, and
        # PostgreSQL's children rewrite their titles: the inherited environment still names it.
        return any(marker in value for value in process.environ().values())
    return False


def _leftovers(var_dir: Path, group: int) -> list[psutil.Process]:
    found = {p.pid: p for p in psutil.process_iter() if _is_ours(p, var_dir, group)}
    # PostgreSQL's backends overwrite their argv and environ with a title: reach them as children.
    for process in list(found.values()):
        with contextlib.suppress(psutil.Error):
            found.update((child.pid, child) for child in process.children(recursive=True)
                         if child.status() != psutil.STATUS_ZOMBIE)
    return list(found.values())


def _describe(processes: list[psutil.Process]) -> list[str]:
    described = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            described.append(f"{process.pid} {process.status()} {' '.join(process.cmdline())[:160]}")
    return described


def _kill_everything(launcher: Launcher) -> None:
    """Whatever a failure left running goes, so the next run starts clean."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(launcher.process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        launcher.process.wait(timeout=10)
    postgres = embedded_postgres(launcher.var_dir)
    if postgres.is_running():
        postgres.stop()  # gracefully: a SIGKILLed postmaster leaves shared memory behind
    left = _leftovers(launcher.var_dir, launcher.process.pid)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(left, timeout=10)


def test_make_run_serves_delivers_and_stops_cleanly(var_dir: Path, tmp_path: Path) -> None:
    launcher = _start_launcher(var_dir, tmp_path / "launcher.log")
    group = launcher.process.pid  # start_new_session: the launcher leads its group and session
    started = time.monotonic()
    try:
        _wait_for_banner(launcher)
        banner_seconds = time.monotonic() - started
        # Readiness first, banner second: the user's first curl must not meet a refused port.
        assert _healthz_status(launcher.port) == 200, launcher.tail()

        key = (var_dir / "demo_api_key").read_text().strip()
        code = f"{secrets.randbelow(10**6):06d}"
        response = _send_banner_email(launcher.port, key, code)
        assert response.status_code == 202, response.text
        mail_dir = var_dir / "mail"  # settings.MAIL_SINK_DIR under NOTIFIER_VAR_DIR
        assert wait_for(lambda: _emails_with(mail_dir, code), timeout=MAIL_TIMEOUT_SECONDS, interval=0.2), (
            f"no .eml with {code} in {mail_dir}:\n{launcher.tail()}"
        )
        time.sleep(DUPLICATE_GRACE_SECONDS)
        emails = _emails_with(mail_dir, code)
        assert len(emails) == 1
        assert code in emails[0].with_suffix(".txt").read_text()  # what the banner's `cat` shows
        start_up = launcher.log().split("notifier is ready")[0]
        assert start_up.count("\n") <= START_UP_LINES_MAX and "[tasks]" not in start_up, start_up

        # Ctrl-C in a terminal signals the whole foreground group, not only the launcher.
        os.killpg(group, signal.SIGINT)
        try:
            launcher.process.wait(timeout=EXIT_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the launcher ignored Ctrl-C for {EXIT_TIMEOUT_SECONDS:.0f} s:\n{launcher.tail()}")
        print(f"\nbanner after {banner_seconds:.0f} s, stopped after {time.monotonic() - started:.0f} s")

        stopping = launcher.log().split("SIGINT received")[-1]
        assert "rc=" not in stopping and " web.1 stopped" in stopping, stopping
        assert stopping.rstrip().endswith("make run: everything stopped."), stopping
        # Stopping is asynchronous only up to the launcher's exit: anything alive now is leaked.
        assert _describe(_leftovers(var_dir, group)) == [], launcher.tail()
        postgres = embedded_postgres(var_dir)
        assert not (postgres.pgdata / "postmaster.pid").exists()
        assert not postgres.is_running()
        assert not embedded_redis(var_dir).is_running()
    finally:
        _kill_everything(launcher)
