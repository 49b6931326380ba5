"""The ops worker (status, webhook and maintenance queues) as a test subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

from testkit import processes


def ops_worker(env: dict[str, str], log_dir: Path, concurrency: int = 2) -> processes.ManagedProcess:
    env = {**env, "NOTIFIER_WORKER_OPS_CONCURRENCY": str(concurrency)}
    argv = [sys.executable, "-m", "core.worker", "ops"]
    return processes.ManagedProcess("worker-ops", argv, env, log_dir)
