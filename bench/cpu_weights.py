"""CPU weights per service on one host, as a production service manager sets them.

systemd gives each unit a cgroup with its `CPUWeight=`, Docker each container its `cpu_shares`:
the kernel then shares the CPU between services by weight, whatever each service's processes
and sessions are. A benchmark that runs every service on one host starts each one's processes in
a cpu cgroup of its own with the weight the deployment gives it (docker-compose.yml's
`cpu_shares`), so the latency services are served first as they would be in production, instead
of the scheduler's autogroups sharing the CPU per session (docs/decisions.md 74-75).

cgroup v1 (`/sys/fs/cgroup/cpu`, `cpu.shares`, 1024 the default) and v2 (`cpu.weight`, 100 the
default) are both supported; where neither is writable (no root, a container without its own
cgroup namespace), `CpuWeights.create` returns None and the services share the CPU as they are.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import yaml

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker-compose.yml"
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
# Tried in this order: (mount point, the file a group's weight is written to).
HIERARCHIES = ((V1_ROOT, "cpu.shares"), (V2_ROOT, "cpu.weight"))
DEFAULT_SHARES = 1024
# The one line the wrapper runs: join the cgroup, then become the service (same pid, so signals,
# process groups and /proc readings are the service's own).
_JOIN_THEN_EXEC = 'echo $$ > "$0" && exec "$@"'


@dataclass
class CpuWeights:
    """One cgroup per service, `<name>-<service>` beside the host's other groups (no parent group:
    a parent's weight would count once for all of them, against each autogroup and each
    PostgreSQL backend), each weighted in cpu.shares units."""

    base: Path
    name: str
    weight_file: str  # "cpu.shares" (v1) or "cpu.weight" (v2)
    shares: dict[str, int]

    @classmethod
    def create(cls, shares: dict[str, int], name: str) -> CpuWeights | None:
        """The service cgroups, or None where this host's cgroups are not ours to make."""
        for base, weight_file in HIERARCHIES:
            if not _controls_cpu(base, weight_file):
                continue
            weights = cls(base, name, weight_file, dict(shares))
            try:
                weights._make()
            except OSError:
                weights.remove()
                continue
            return weights
        return None

    def group(self, service: str) -> Path:
        return self.base / f"{self.name}-{service}"

    def _make(self) -> None:
        for service, shares in self.shares.items():
            self.group(service).mkdir(exist_ok=True)
            (self.group(service) / self.weight_file).write_text(str(self._value(shares)))

    def _value(self, shares: int) -> int:
        if self.weight_file == "cpu.shares":
            return shares
        return max(1, min(10_000, round(shares * 100 / DEFAULT_SHARES)))

    def wrap(self, service: str, argv: list[str]) -> list[str]:
        """`argv` started inside `service`'s cgroup; unchanged for a service without a weight."""
        if service not in self.shares:
            return argv
        return ["/bin/sh", "-c", _JOIN_THEN_EXEC, str(self.group(service) / "cgroup.procs"), *argv]

    def join(self, service: str, pid: int) -> None:
        """Move a running process and all its descendants into `service`'s group (children it
        forks later are born there)."""
        if service not in self.shares:
            return
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(OSError):  # gone meanwhile, or a kernel thread
                (self.group(service) / "cgroup.procs").write_text(str(process.pid))

    def remove(self, patience: float = 5.0) -> None:
        """Move any process left to the host's root group, then remove the groups (best effort).
        A process killed just before may still be exiting, and its group busy (EBUSY) until it
        is gone: each group is tried again for up to `patience` seconds."""
        deadline = time.monotonic() + patience
        for service in self.shares:
            group = self.group(service)
            while group.exists():
                with contextlib.suppress(OSError):
                    for pid in (group / "cgroup.procs").read_text().split():
                        with contextlib.suppress(OSError):
                            (self.base / "cgroup.procs").write_text(pid)
                with contextlib.suppress(OSError):
                    group.rmdir()
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)


def cpu_cgroups_writable() -> bool:
    """Whether `CpuWeights.create` can make groups here (root on a host with a cpu controller)."""
    return any(_controls_cpu(base, weight_file) for base, weight_file in HIERARCHIES)


def _controls_cpu(base: Path, weight_file: str) -> bool:
    if weight_file == "cpu.weight":
        controllers = base / "cgroup.controllers"
        if not controllers.exists() or "cpu" not in controllers.read_text().split():
            return False
    else:
        if not (base / "cpu.shares").exists():
            return False
    return os.access(base, os.W_OK)


def compose_shares(services: dict[str, str], path: Path = COMPOSE_FILE) -> dict[str, int]:
    """{process name: cpu_shares of its docker-compose.yml service} for `services` (process
    name -> compose service), so a benchmark weighs its processes as the deployment does."""
    declared = yaml.safe_load(path.read_text())["services"]
    return {name: declared[service]["cpu_shares"] for name, service in services.items()
            if "cpu_shares" in declared.get(service, {})}


def parse_shares(text: str) -> dict[str, int]:
    """'web=8192,critical=4096' -> {'web': 8192, 'critical': 4096}; '' -> {}."""
    pairs = [pair.split("=", 1) for pair in text.split(",") if pair.strip()]
    return {name.strip(): int(value) for name, value in pairs}
