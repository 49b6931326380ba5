"""POST /api/v1/messages latency through the Procfile's web server, granian (target: p99 < 100 ms).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/notifier_bench REDIS_URL=redis://127.0.0.1:6379/9 \
        .venv/bin/python bench/api_latency.py --requests 1000 --runs 3

Prints p50/p95/p99/max per run and the median of each over the runs. Messages are queued, not
sent (no worker runs): this measures the accept path (auth, validation, insert, publish).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness


def _prepare() -> str:
    return harness.otp_api_key("bench")


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
    return {"p50": harness.percentile(latencies, 0.5), "p95": harness.percentile(latencies, 0.95),
            "p99": harness.percentile(latencies, 0.99), "max": max(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    key = _prepare()
    web = harness.web(harness.process_env(), harness.log_dir(harness.LOG_DIR / "api_latency"), args.port)
    web.start()
    try:
        url = f"http://127.0.0.1:{args.port}/api/v1/messages"
        harness.wait_http(f"http://127.0.0.1:{args.port}/healthz")
        runs = [_run(url, key, args.requests) for _ in range(args.runs)]
        for i, run in enumerate(runs, 1):
            print(f"run {i}: " + "  ".join(f"{k}={v:.1f}ms" for k, v in run.items()))
        print("median: " + "  ".join(
            f"{k}={statistics.median(r[k] for r in runs):.1f}ms" for k in runs[0]))
    finally:
        web.stop(timeout=10)
        harness.manage("shell", "-c", "from notifier.celery import app; app.control.purge()")


if __name__ == "__main__":
    main()
