"""POST /api/v1/messages latency through gunicorn (target: p99 < 100 ms).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/notifier_bench REDIS_URL=redis://127.0.0.1:6379/9 \
        .venv/bin/python bench/api_latency.py --requests 1000 --runs 3

Prints p50/p95/p99/max per run and the median of each over the runs. Messages are queued, not
sent (no worker runs): this measures the accept path (auth, validation, insert, publish).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests

BASE_DIR = Path(__file__).resolve().parent.parent


def _manage(*args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True,
                          capture_output=True, text=True).stdout


def _ensure_database() -> None:
    """Create the benchmark's PostgreSQL database if DATABASE_URL names a missing one."""
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


def _prepare() -> str:
    _ensure_database()
    _manage("migrate", "--noinput")
    key = _manage("create_api_key", "bench").strip().splitlines()[-1]
    _manage("shell", "-c", "from templates.models import Template;"
            "from templates.services import template_create;"
            "from clients.models import ApiClient;"
            f"client = ApiClient.objects.get_from_key({key!r});"  # the key's own template (decision 50)
            "Template.objects.filter(client=client, name='bench-otp').exists() or template_create("
            "client=client, name='bench-otp', subject='Code {{ code }}', html_body='<p>{{ code }}</p>')")
    return key


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(url: str, key: str, count: int) -> dict[str, float]:
    session = requests.Session()
    session.headers["Authorization"] = f"Api-Key {key}"
    latencies = []
    for n in range(count):
        body = {"to": f"bench{n}@example.com", "template": "bench-otp", "priority": "critical",
                "context": {"code": str(n)}}
        started = time.perf_counter()
        response = session.post(url, json=body, timeout=10)
        latencies.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 202, response.text
    return {"p50": _percentile(latencies, 0.5), "p95": _percentile(latencies, 0.95),
            "p99": _percentile(latencies, 0.99), "max": max(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    os.environ.setdefault("NOTIFIER_TASK_EVENTS", "false")
    key = _prepare()
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "notifier.wsgi", "--bind",
                            f"127.0.0.1:{args.port}", "--workers", "2", "--threads", "4"],
                           cwd=BASE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{args.port}/api/v1/messages"
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{args.port}/healthz", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        runs = [_run(url, key, args.requests) for _ in range(args.runs)]
        for i, run in enumerate(runs, 1):
            print(f"run {i}: " + "  ".join(f"{k}={v:.1f}ms" for k, v in run.items()))
        print("median: " + "  ".join(
            f"{k}={statistics.median(r[k] for r in runs):.1f}ms" for k in runs[0]))
    finally:
        web.terminate()
        web.wait(timeout=10)
        _manage("shell", "-c", "from notifier.celery import app; app.control.purge()")


if __name__ == "__main__":
    main()
