"""bench/cpu_weights.py: each benchmarked service starts in a cpu cgroup with its weight."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.cpu_weights import CpuWeights, compose_shares, cpu_cgroups_writable, parse_shares
from bench.million_procs import COMPOSE_SERVICES

# Busy for argv[2] seconds on the one CPU argv[1].
SPIN = ("import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "end = time.time() + float(sys.argv[2])\nwhile time.time() < end: pass\n")


def test_parse_shares_reads_each_pair_and_nothing_from_an_empty_string() -> None:
    assert parse_shares("web=8192, low=512") == {"web": 8192, "low": 512}
    assert parse_shares("") == {}


def test_the_million_day_weighs_its_processes_as_docker_compose_does() -> None:
    """Every process the scenario weighs names a compose service that sets cpu_shares, and the
    latency services outweigh the bulk pools."""
    shares = compose_shares(COMPOSE_SERVICES)
    assert set(shares) == set(COMPOSE_SERVICES)
    assert min(shares["web"], shares["critical"], shares["high"]) > max(shares["normal"], shares["low"])


def test_compose_shares_skips_a_service_without_a_weight(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yml"
    compose.write_text("services:\n  web: {cpu_shares: 4096}\n  worker-p2: {image: x}\n")
    assert compose_shares({"web": "web", "normal": "worker-p2"}, compose) == {"web": 4096}


def test_groups_get_their_weight_and_a_wrapped_service_joins_its_group(tmp_path: Path) -> None:
    """The cgroup layout written into a plain directory: a file stands in for cgroup.procs."""
    weights = CpuWeights(tmp_path, "grp", "cpu.shares", {"web": 8192, "low": 512})
    weights._make()
    assert (tmp_path / "grp-web" / "cpu.shares").read_text() == "8192"
    assert (tmp_path / "grp-low" / "cpu.shares").read_text() == "512"

    argv = weights.wrap("web", [sys.executable, "-c", "import os; print(os.getpid())"])
    printed = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    # exec, not a child: the pid that joined the group is the service's own.
    assert (tmp_path / "grp-web" / "cgroup.procs").read_text().strip() == printed
    assert weights.wrap("scheduler", ["true"]) == ["true"]


def test_cgroup_v2_weights_are_the_shares_scaled_to_its_range(tmp_path: Path) -> None:
    weights = CpuWeights(tmp_path, "grp", "cpu.weight", {"web": 8192, "low": 512, "tiny": 2})
    weights._make()
    values = {s: (tmp_path / f"grp-{s}" / "cpu.weight").read_text() for s in ("web", "low", "tiny")}
    assert values == {"web": "800", "low": "50", "tiny": "1"}


def test_a_weighted_service_gets_the_cpu_before_an_unweighted_one() -> None:
    """Two spinners on one CPU, each in a session of its own (as the benchmarks start services):
    without a cgroup they share it equally (autogroups), with shares 8192 against 1024 the
    weighted one gets most of it."""
    if not cpu_cgroups_writable():
        pytest.skip("no writable cpu cgroup on this host (needs root; README: Tests)")
    weights = CpuWeights.create({"heavy": 8192}, f"notifier-test-{os.getpid()}")
    assert weights is not None
    spin = [sys.executable, "-c", SPIN, str(min(os.sched_getaffinity(0))), "2.0"]
    try:
        heavy = subprocess.Popen(weights.wrap("heavy", spin), start_new_session=True)
        light = subprocess.Popen(spin, start_new_session=True)
        seconds = {}
        time.sleep(1.5)
        for name, proc in (("heavy", heavy), ("light", light)):
            times = psutil.Process(proc.pid).cpu_times()
            seconds[name] = times.user + times.system
        heavy.wait(10)
        light.wait(10)
    finally:
        weights.remove()
    assert seconds["heavy"] > 2 * seconds["light"], seconds
    assert not weights.group("heavy").exists()


def test_a_running_process_and_its_children_join_a_group() -> None:
    """How the benchmark weighs the host's PostgreSQL server: its backends fork from it."""
    if not cpu_cgroups_writable():
        pytest.skip("no writable cpu cgroup on this host (needs root; README: Tests)")
    weights = CpuWeights.create({"server": 2048}, f"notifier-test-{os.getpid()}")
    assert weights is not None
    server = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        time.sleep(0.2)
        tree = [server.pid, *(c.pid for c in psutil.Process(server.pid).children())]
        assert len(tree) == 2
        name = weights.group("server").name
        weights.join("server", server.pid)
        assert all(name in Path(f"/proc/{pid}/cgroup").read_text() for pid in tree)
        weights.remove()  # moves them back to the host's group first, else rmdir would fail
        assert not weights.group("server").exists()
        assert all(name not in Path(f"/proc/{pid}/cgroup").read_text() for pid in tree)
    finally:
        os.killpg(server.pid, 9)
        server.wait()
        weights.remove()
