"""HTTP front candidates for the web process: CPU per POST /api/v1/messages and throughput.

    .venv/bin/python -m bench.web_front --requests 2000 --concurrency 8

Uses DATABASE_URL/REDIS_URL, or starts the embedded PostgreSQL and Redis (var/) when unset.
Each candidate serves notifier's WSGI app with 2 worker processes; the load is closed-loop
(`--concurrency` keep-alive clients) from this process, on the same cores. CPU is utime+stime
of the server's whole process tree from /proc/<pid>/stat, read before and after the run.
Messages are queued, not sent (no worker runs): this is the accept path.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from bench import harness

BASE_DIR = Path(__file__).resolve().parent.parent
APP = "notifier.wsgi:application"
# granian <workers>x<blocking threads>: the Procfile's 2x4 and the shapes decision 81 compared.
GRANIAN_SHAPES = ((2, 4), (2, 2), (2, 1), (1, 4), (1, 2))


def _granian(workers: int, threads: int) -> list[str]:
    return ["granian", "--interface", "wsgi", "--workers", str(workers), "--blocking-threads",
            str(threads), "--no-ws", "--host", "127.0.0.1", "--port", "{port}", APP]


CANDIDATES = {
    "gunicorn-gthread-2x4": ["gunicorn", "notifier.wsgi", "--workers", "2", "--threads", "4",
                             "--bind", "127.0.0.1:{port}"],
    **{f"granian-wsgi-{w}x{t}": _granian(w, t) for w, t in GRANIAN_SHAPES},
}


def _prepare() -> str:
    """Migrate, the bench-otp template, and an API key whose rate never throttles the run."""
    return harness.otp_api_key("bench-front", "--rate", "1000000/min")


def _load(url: str, key: str, count: int, concurrency: int) -> float:
    """Closed loop: `concurrency` clients post `count` messages in all; returns the seconds taken."""
    counter = iter(range(count))
    lock = threading.Lock()
    errors: list[str] = []

    def client() -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Api-Key {key}"
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            body = {"to": f"bench{n}@example.com", "template": "bench-otp", "priority": "critical",
                    "context": {"code": str(n)}}
            response = session.post(url, json=body, timeout=30)
            if response.status_code != 202:
                errors.append(response.text)
                return

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    return time.perf_counter() - started


def _measure(name: str, key: str, port: int, count: int, concurrency: int) -> str:
    argv = [str(Path(sys.executable).parent / arg) if i == 0 else arg.format(port=port)
            for i, arg in enumerate(CANDIDATES[name])]
    server = subprocess.Popen(argv, cwd=BASE_DIR, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/api/v1/messages"
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
                break
            except requests.RequestException:  # not listening yet, or still importing Django
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        _load(url, key, 100, concurrency)  # warm every worker and thread
        cpu_before = harness.tree_cpu_seconds(server.pid)
        seconds = _load(url, key, count, concurrency)
        cpu = harness.tree_cpu_seconds(server.pid) - cpu_before
        return (f"{name:22} {count / seconds:7.1f} req/s  {cpu * 1000 / count:5.2f} ms CPU/request "
                f"(server tree), load avg {os.getloadavg()[0]:.2f}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("candidates", nargs="*", default=["gunicorn-gthread-2x4", "granian-wsgi-2x4"],
                        help=f"of: {', '.join(CANDIDATES)}")
    args = parser.parse_args()
    os.environ.setdefault("NOTIFIER_TASK_EVENTS", "false")
    started = []
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        from devtools.embedded import embedded_postgres, embedded_redis

        for server in (embedded_postgres(BASE_DIR / "var"), embedded_redis(BASE_DIR / "var")):
            if server.start():
                started.append(server)
    try:
        key = _prepare()
        for name in args.candidates:
            print(_measure(name, key, args.port, args.requests, args.concurrency), flush=True)
        harness.manage("shell", "-c", "from notifier.celery import app; app.control.purge()")
    finally:
        for server in started:
            server.stop()


if __name__ == "__main__":
    main()
