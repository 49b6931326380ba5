from core.priorities import POOLS, Priority, pool_size, queue_for
from core.worker import worker_argv, worker_environment


def test_each_priority_has_its_own_queue_and_batch_size():
    assert [queue_for(p) for p in Priority] == [f"email-send-p{i}" for i in range(4)]
    assert [POOLS[p].batch_size for p in Priority] == [1, 10, 100, 500]


def test_critical_worker_consumes_only_its_queue_with_prefetch_one(monkeypatch):
    monkeypatch.delenv("NOTIFIER_WORKER_P0_CONCURRENCY", raising=False)
    monkeypatch.setenv("NOTIFIER_WORKER_SCALE", "1")
    argv = worker_argv("critical")
    assert argv[argv.index("-Q") + 1] == "email-send-p0"
    assert argv[argv.index("--prefetch-multiplier") + 1] == "1"
    assert "--autoscale=20,5" in argv


def test_pools_scale_down_for_small_machines_and_can_be_pinned(monkeypatch):
    monkeypatch.setenv("NOTIFIER_WORKER_SCALE", "0.1")
    assert pool_size(Priority.NORMAL) == (1, 10)
    monkeypatch.setenv("NOTIFIER_WORKER_P2_CONCURRENCY", "3")
    assert pool_size(Priority.NORMAL) == (3, 3)
    assert "--concurrency" in worker_argv("normal")


def test_p0_and_p1_pools_send_no_task_events_unless_asked():
    assert worker_environment("critical", {}) == {"NOTIFIER_TASK_EVENTS": "false"}
    assert worker_environment("high", {"NOTIFIER_TASK_EVENTS": "true"}) == {"NOTIFIER_TASK_EVENTS": "false"}
    assert worker_environment("critical", {"NOTIFIER_FAST_POOL_TASK_EVENTS": "true"}) == {}
    assert worker_environment("normal", {}) == {}


def test_a_role_can_run_a_threads_pool_of_its_own(monkeypatch):
    monkeypatch.delenv("NOTIFIER_WORKER_POOL", raising=False)
    monkeypatch.setenv("NOTIFIER_WORKER_POOL_CRITICAL", "threads")
    monkeypatch.setenv("NOTIFIER_WORKER_P0_CONCURRENCY", "4")
    critical, normal = worker_argv("critical"), worker_argv("normal")
    assert critical[critical.index("-P") + 1] == "threads"
    assert critical[critical.index("--concurrency") + 1] == "4"
    assert normal[normal.index("-P") + 1] == "prefork"
    monkeypatch.setenv("NOTIFIER_WORKER_POOL", "threads")
    low = worker_argv("low")
    assert low[low.index("-P") + 1] == "threads"
