"""Bulk pools run at a higher CPU niceness than the P0 pool, children included, so on a busy
host the kernel serves OTPs and the API first (core/priorities.py)."""

from __future__ import annotations

import psutil
import pytest

from testkit import processes

pytestmark = pytest.mark.e2e


def _nice_of_pool(worker: processes.ManagedProcess) -> set[int]:
    main = psutil.Process(worker.process.pid)
    return {p.nice() for p in [main, *main.children(recursive=True)]}


def test_bulk_pools_yield_the_cpu_to_critical(process_env, spawn, tmp_path):
    critical = spawn(processes.celery_worker("critical", process_env, tmp_path))
    normal = spawn(processes.celery_worker("normal", process_env, tmp_path, concurrency=2))
    low = spawn(processes.celery_worker("low", {**process_env, "NOTIFIER_WORKER_P3_NICE": "5"}, tmp_path))
    for worker in (critical, normal, low):
        worker.wait_for_log("ready.")
    base = psutil.Process().nice()  # the pools start from the test runner's own niceness
    assert _nice_of_pool(critical) == {base}
    assert _nice_of_pool(normal) == {min(base + 10, 19)}
    assert _nice_of_pool(low) == {min(base + 5, 19)}
