"""What the benchmark scripts share: Django and the database/Redis they run against, the notifier
processes they start, and how they compute and print figures.

A script run as `python bench/<name>.py` has bench/ on sys.path, not the repository: it inserts
the repository root itself (one line) before `from bench import harness`.

Services are selected as for the app (notifier.settings): DATABASE_URL and REDIS_URL, else the
embedded servers under var/, which must then be running (`make run` starts them).

Processes are testkit/processes.ManagedProcess, the tests' helper too: one subprocess class
for both (own session, log file, wait for a log line, stop or SIGKILL the group).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil
import requests

from testkit.processes import ManagedProcess, web_server

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOG_DIR = ROOT / "bench" / "results"  # git-ignored


def django_setup(*, own_redis_prefix: bool = False) -> None:
    """Django on notifier.settings unless DJANGO_SETTINGS_MODULE names other settings.

    `own_redis_prefix`: Redis keys under a prefix of this run (unless NOTIFIER_REDIS_PREFIX is
    set), so rate limits, breakers and leases start empty and a live app on the same Redis does
    not see them.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")
    if own_redis_prefix:
        os.environ.setdefault("NOTIFIER_REDIS_PREFIX", f"bench-{uuid.uuid4().hex[:8]}")
    import django

    django.setup()


def ensure_database() -> None:
    """Create the PostgreSQL database DATABASE_URL names if it is missing (not migrated)."""
    import environ
    import psycopg2

    cfg = environ.Env.db_url_config(os.environ.get("DATABASE_URL", ""))
    if "postgresql" not in cfg.get("ENGINE", ""):
        return
    conn = psycopg2.connect(dbname="postgres", user=cfg["USER"] or None, host=cfg["HOST"],
                            port=cfg["PORT"] or 5432, password=cfg["PASSWORD"] or None)
    conn.autocommit = True
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [cfg["NAME"]])
        if not cursor.fetchone():
            cursor.execute(f'CREATE DATABASE "{cfg["NAME"]}"')
    conn.close()


def scratch_database_url(name: str) -> str:
    """DATABASE_URL with its database replaced by `name` (a benchmark's own, created and dropped
    with `server_statement`)."""
    return urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{name}"))


def server_statement(statement: str, url: str | None = None) -> None:
    """One statement on the server's `postgres` database (CREATE / DROP DATABASE), on the server
    of `url` (DATABASE_URL by default)."""
    import psycopg2

    parts = urlsplit(url or os.environ["DATABASE_URL"])
    query = dict(part.split("=", 1) for part in parts.query.split("&") if part)
    conn = psycopg2.connect(dbname="postgres", user=parts.username or None, password=parts.password or None,
                            host=parts.hostname or query.get("host"), port=parts.port or 5432)
    conn.autocommit = True
    with conn.cursor() as cursor:
        cursor.execute(statement)
    conn.close()


def database_drop(name: str, url: str | None = None) -> None:
    """Drop the scratch database `name` on `url`'s server (DATABASE_URL's by default), its
    connections closed first."""
    server_statement(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', url)


def sql(statement: str, params: list | dict | None = None) -> list[tuple]:
    """One statement on Django's connection; its rows, if it returns any."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])
        return cursor.fetchall() if cursor.description else []


def manage(*args: str, env: dict[str, str] | None = None, check: bool = True,
           timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """`python manage.py <args>` in the repository, output captured."""
    return subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=check,
                          capture_output=True, text=True, timeout=timeout)


# --- processes ----------------------------------------------------------------------------------


def process_env(**extra: str) -> dict[str, str]:
    """This process's environment (the same database and Redis) for the processes a script
    starts, without Celery task events (nothing reads them here) unless NOTIFIER_TASK_EVENTS says."""
    return {"NOTIFIER_TASK_EVENTS": "false", **os.environ, **extra}


def log_dir(path: Path) -> Path:
    """`path`, created, without the logs of an earlier run: readiness is read from the logs and
    ManagedProcess appends (a restarted process keeps its log)."""
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.log"):
        stale.unlink()
    return path


def web(env: dict[str, str], logs: Path, port: int, workers: int = 2) -> ManagedProcess:
    """The Procfile's web process (granian, WSGI) on `port` with `workers` workers, run from the
    Procfile's own line."""
    return web_server(env, logs, port, workers)


def worker(role: str, env: dict[str, str], logs: Path) -> ManagedProcess:
    """The Celery pool of one role (core.worker: critical, high, normal, low, ops)."""
    return ManagedProcess(f"worker-{role}", [PY, "-m", "core.worker", role], env, logs)


def scheduler(env: dict[str, str], logs: Path, interval: float | None = None) -> ManagedProcess:
    """`manage.py run_scheduler`, its own tick unless `interval` (seconds) is given."""
    argv = [PY, "manage.py", "run_scheduler"]
    if interval is not None:
        argv += ["--interval", str(interval)]
    return ManagedProcess("scheduler", argv, env, logs)


def wait_http(url: str, timeout: float = 30.0) -> None:
    """Until `url` answers (any status). The server may accept connections before its workers
    have imported Django: a read timeout means "not yet", like a refused connection."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=5)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit(f"web server did not start: {url}")


def process_tree(process: ManagedProcess) -> list[psutil.Process]:
    """The process and all its descendants (pool children), for RSS and CPU time (psutil reads
    /proc); empty once it has exited."""
    try:
        return [psutil.Process(process.process.pid), *process.children()]
    except psutil.NoSuchProcess:
        return []


def tree_cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """utime + stime of `pid` and its live descendants, from /proc through psutil (`ps` rounds
    each process down to whole seconds); with `reaped`, also what each has reaped (Celery's
    replaced pool children, PostgreSQL's exited backends). 0 once `pid` has exited."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
        total += times.children_user + times.children_system if reaped else 0.0
    return total


# --- figures ------------------------------------------------------------------------------------


def listener_pid(port: int) -> int | None:
    """The pid of the process listening on this host's TCP `port`, if it is visible to us."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return conn.pid
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The value at rank int(q * n) of the sorted values (the largest for q close to 1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def otp_api_key(client_name: str, *create_args: str) -> str:
    """Migrate, create an API key for `client_name` (extra `create_api_key` arguments, e.g.
    --rate) and that client's `bench-otp` template (templates belong to a client, decision 50)."""
    ensure_database()
    manage("migrate", "--noinput")
    key = manage("create_api_key", client_name, *create_args).stdout.strip().splitlines()[-1]
    manage("shell", "-c", "from templates.models import Template;"
           "from templates.services import template_create;"
           "from clients.selectors import service_for_key;"
           f"client = service_for_key({key!r});"
           "Template.objects.filter(client=client, name='bench-otp').exists() or template_create("
           "client=client, name='bench-otp', subject='Code {{ code }}', html_body='<p>{{ code }}</p>')")
    return key


def loadavg() -> str:
    """The 1/5/15-minute load averages, printed beside every figure (the machine is shared)."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_idle_share(seconds: float) -> float:
    """The machine's idle share of CPU time over the next `seconds` (/proc/stat: idle + iowait)."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)

    idle_before, total_before = sample()
    time.sleep(seconds)
    idle_after, total_after = sample()
    return (idle_after - idle_before) / max(1, total_after - total_before)


def settle(*, idle: float = 0.8, window: float = 2.0, timeout: float = 60.0) -> dict:
    """Wait until the machine is at least `idle` idle over a `window` (at most `timeout` s): a
    latency measured next does not queue behind the previous phase's leftovers (a pool still
    exiting, autovacuum of the rows just written). {"seconds": waited, "idle": last share}."""
    began = time.monotonic()
    share = cpu_idle_share(window)
    while share < idle and time.monotonic() - began < timeout:
        share = cpu_idle_share(window)
    return {"seconds": round(time.monotonic() - began, 1), "idle": round(share, 3)}
