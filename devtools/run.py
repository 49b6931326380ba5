"""`make run`: the whole system in the foreground on embedded defaults; Ctrl-C stops it all.

Starts (unless the environment points elsewhere) the embedded PostgreSQL, the embedded Redis and
the SMTP sink, migrates, ensures a demo API key and template, then runs every process of the
Procfile under honcho (devtools/procs.py) and, once the web server and the critical pool answer,
prints a banner with a curl command that sends an email which lands in var/mail/. Once every
process has started and the log has gone quiet, the banner is printed again if start-up lines
scrolled it away. Ctrl-C (or SIGTERM) stops every process it started, the embedded servers
included.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TextIO

import psutil

from devtools.embedded import embedded_postgres, embedded_redis

BASE_DIR = Path(__file__).resolve().parent.parent
READY_TIMEOUT_SECONDS = 120.0
# Start-up is over once every process has started and nothing was printed for this long; the
# banner is printed again then if more lines than this came after it (it scrolled away).
QUIET_SECONDS = 2.0
REPEAT_AFTER_LINES = 10
CRITICAL_QUEUE = "email-send-p0"
# Celery warns at length (9 lines) in every worker that runs as root (a container, a sandbox):
# under `make run` the launcher says it once instead. The message's start, as PYTHONWARNINGS
# matches it.
ROOT_WARNING = "You're running the worker with superuser privileges"
DEMO_TEMPLATE = {
    "name": "welcome",
    "subject": "Welcome, {{ name }}!",
    "html_body": (
        "<style>h1{color:#2a6}</style><h1>Hello {{ name }}</h1>"
        "<p>Your code is <b>{{ code }}</b>.</p>"
    ),
}


def _manage(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True, capture_output=True, text=True
    )
    return result.stdout


def _prepare_environment() -> dict[str, str]:
    env = dict(os.environ)
    # Procfile commands say `python`/`celery`: make them this virtualenv's.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PORT", "8000")
    env.setdefault("NOTIFIER_WORKER_SCALE", "0.1")
    env.setdefault("NOTIFIER_WORKER_P2_CONCURRENCY", "2")
    # The Procfile pins each P0 pool at 4 processes (decision 61); one each on a laptop.
    env.setdefault("NOTIFIER_WORKER_P0_CONCURRENCY", "1")
    # Status callbacks to a receiver on this machine (plain http, 127.0.0.1), as a developer's is.
    env.setdefault("NOTIFIER_CALLBACKS_ALLOW_LOOPBACK", "true")
    env.setdefault("NOTIFIER_WORKER_CALLBACKS_CONCURRENCY", "2")
    if os.geteuid() == 0 and "PYTHONWARNINGS" not in env:
        env["PYTHONWARNINGS"] = f"ignore:{ROOT_WARNING}"
        print("Running as root: Celery advises against running its workers as root (said once"
              " here, not by every worker).", flush=True)
    return env


def _var_dir(env: dict[str, str]) -> Path:
    """The settings' VAR_DIR: the servers' data, the mail sink and the demo key all live there."""
    return Path(env.get("NOTIFIER_VAR_DIR") or BASE_DIR / "var")


def _mail_dir(env: dict[str, str]) -> Path:
    return _var_dir(env) / "mail"  # the settings' MAIL_SINK_DIR


def _start_embedded_services(env: dict[str, str]) -> list:
    """The embedded PostgreSQL and Redis the settings point at when no URL is set.

    Returns the ones this launcher started (and so stops); a server already running (another
    `make run`, a test session) is used as it is.
    """
    var_dir = _var_dir(env)
    started = []
    if not env.get("DATABASE_URL"):
        postgres = embedded_postgres(var_dir)
        print(f"Starting the embedded PostgreSQL in {postgres.pgdata} ...", flush=True)
        if postgres.start():
            started.append(postgres)
    if not env.get("REDIS_URL"):
        redis = embedded_redis(var_dir)
        if redis.start():
            started.append(redis)
    return started


def _start_smtp_sink(env: dict[str, str]) -> subprocess.Popen | None:
    if env.get("SMTP_HOST"):
        return None
    port = env.setdefault("SMTP_PORT", "8025")
    mail_dir = str(_mail_dir(env))
    command = [sys.executable, "-m", "devtools.smtp_sink", "--port", port, "--dir", mail_dir]
    return subprocess.Popen(command, cwd=BASE_DIR, env=env)


def _demo_setup(env: dict[str, str]) -> str:
    """The demo API key (returned) and its service's demo template, in one Django process: each
    `manage.py` start costs seconds. A stored key is reused only while the database knows it
    (a key file can outlive its database: `make clean` of var/postgres, another DATABASE_URL)."""
    key_file = _var_dir(env) / "demo_api_key"
    stored = key_file.read_text().strip() if key_file.exists() else ""
    code = (
        "from templates.services import template_create;"
        "from templates.models import Template;"
        "from clients.selectors import service_for_key;"
        "from clients.services import service_create;"
        f"key = {stored!r};"
        "key = key if key and service_for_key(key) else service_create(name='demo')[1];"
        # The template belongs to the demo service (decision 50), so the tour's key can send it.
        "client = service_for_key(key);"
        f"Template.objects.filter(client=client, name={DEMO_TEMPLATE['name']!r}).exists() or "
        f"template_create(client=client, **{DEMO_TEMPLATE!r});"
        "print(key)"
    )
    key = _manage("shell", "-c", code).strip().splitlines()[-1]
    if key != stored:
        key_file.write_text(key)
        key_file.chmod(0o600)
    return key


def banner(env: dict[str, str], key: str) -> str:
    port, mail_dir = env["PORT"], _mail_dir(env)
    return (
        f"\nnotifier is ready on http://127.0.0.1:{port}  (admin: /admin/, health: /healthz,"
        f" Flower: http://127.0.0.1:{env.get('FLOWER_PORT', '5555')})\n"
        "Send an email:\n\n"
        f"curl -s -X POST http://127.0.0.1:{port}/api/v1/messages \\\n"
        f"  -H 'Authorization: Api-Key {key}' -H 'Content-Type: application/json' \\\n"
        "  -d '{\"to\": \"you@example.com\", \"template\": \"welcome\", \"priority\": \"critical\","
        " \"context\": {\"name\": \"Ada\", \"code\": \"123456\"}}'\n\n"
        f"It lands in {mail_dir}/ as an .eml file, with a readable .txt beside it:\n\n"
        f"cat {mail_dir}/*.txt\n\n"
        "More in README.md, \"A five-minute tour\". Ctrl-C stops everything.\n\n"
    )


class Console:
    """The launcher's stdout, shared by the processes' lines (relayed) and the banner: counts
    what was printed and when, so the banner can be repeated once start-up lines scroll it."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lines = 0
        self.last_write = time.monotonic()
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self.out.write(text)
            self.out.flush()
            self.lines += text.count("\n")
            self.last_write = time.monotonic()

    def relay(self, stream: TextIO) -> None:
        for line in stream:
            self.write(line)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _wait_until_ready(env: dict[str, str], procs: subprocess.Popen) -> bool:
    """True once /healthz answers 200 and a worker consumes the critical queue."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    url = f"http://127.0.0.1:{env['PORT']}/healthz"
    while time.monotonic() < deadline and procs.poll() is None:
        if _answers(url) and _critical_pool_consumes(env):
            return True
        time.sleep(1)
    return False


def _wait_until_started(env: dict[str, str], procs: subprocess.Popen, console: Console) -> bool:
    """True once every worker of the Procfile answers, Flower listens and the log is quiet."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    workers = (BASE_DIR / "Procfile").read_text().count("-m core.worker ")
    while time.monotonic() < deadline and procs.poll() is None:
        if _workers_answering(env) >= workers and _listens(int(env.get("FLOWER_PORT", "5555"))):
            break
        time.sleep(1)
    while time.monotonic() < deadline and procs.poll() is None:
        if time.monotonic() - console.last_write >= QUIET_SECONDS:
            return True
        time.sleep(0.2)
    return False


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _listens(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _workers_answering(env: dict[str, str]) -> int:
    command = [sys.executable, "-m", "celery", "-A", "notifier", "inspect", "ping", "--json",
               "--timeout", "2"]
    result = subprocess.run(command, cwd=BASE_DIR, env=env, capture_output=True, text=True)
    try:
        return len(json.loads(result.stdout))
    except ValueError:  # no worker answered: celery prints an error, not JSON
        return 0


def _critical_pool_consumes(env: dict[str, str]) -> bool:
    command = [sys.executable, "-m", "celery", "-A", "notifier", "inspect", "active_queues",
               "--json", "--timeout", "2"]
    result = subprocess.run(command, cwd=BASE_DIR, env=env, capture_output=True, text=True)
    return result.returncode == 0 and f'"{CRITICAL_QUEUE}"' in result.stdout


def _stop_descendants() -> None:
    """Whatever honcho left behind (a pool child that outlived its parent) goes too."""
    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def _run_processes(env: dict[str, str], key: str) -> None:
    console = Console(sys.stdout)
    argv = [sys.executable, "-m", "devtools.procs", *(["--colour"] if sys.stdout.isatty() else [])]
    procs = subprocess.Popen(argv, cwd=BASE_DIR, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")
    relay = threading.Thread(target=console.relay, args=(procs.stdout,), daemon=True)
    relay.start()
    try:
        if _wait_until_ready(env, procs):
            console.write(banner(env, key))
            shown = console.lines
            if _wait_until_started(env, procs, console) and console.lines - shown > REPEAT_AFTER_LINES:
                console.write(banner(env, key))  # start-up lines scrolled the first one away
        elif procs.poll() is None:
            print(f"notifier did not answer within {READY_TIMEOUT_SECONDS:.0f} s; see the log above.",
                  file=sys.stderr, flush=True)
        procs.wait()
    except KeyboardInterrupt:
        procs.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            procs.wait(timeout=30)
    relay.join(timeout=5)


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)  # stop everything on SIGTERM as on Ctrl-C
    os.chdir(BASE_DIR)
    env = _prepare_environment()
    services: list = []
    sink = None
    try:
        services = _start_embedded_services(env)
        sink = _start_smtp_sink(env)
        _manage("migrate", "--noinput")
        _run_processes(env, _demo_setup(env))
    except KeyboardInterrupt:
        pass
    finally:
        if sink:
            sink.terminate()
        _stop_descendants()
        for service in reversed(services):
            service.stop()
        print("make run: everything stopped.", flush=True)


if __name__ == "__main__":
    main()
