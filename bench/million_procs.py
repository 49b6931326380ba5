"""Processes of the million-email day: a dedicated Redis, the Procfile set, the chaos monkey and
a psutil sampler (peak RSS, CPU seconds, broker queue depth per priority)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench import harness
from bench.cpu_weights import CpuWeights
from testkit.processes import ManagedProcess

SEND_QUEUES = {"P0": "email-send-p0", "P1": "email-send-p1", "P2": "email-send-p2", "P3": "email-send-p3"}
ROLES = ("critical", "high", "normal", "low", "ops")
# The docker-compose.yml service that runs each process here (its cpu_shares weigh it).
COMPOSE_SERVICES = {"web": "web", "critical": "worker-p0", "high": "worker-p1", "normal": "worker-p2",
                    "low": "worker-p3", "ops": "worker-ops", "scheduler": "scheduler",
                    "redis": "redis", "postgres": "postgres", "rabbitmq": "rabbitmq"}


def pool_names(pools: dict[str, int] | None = None) -> list[tuple[str, str]]:
    """(role, process name) of every pool: `pools[role]` per role (default one), named `<role>`,
    then `<role>2`, `<role>3`, ..."""
    return [(role, role if n == 1 else f"{role}{n}")
            for role in ROLES for n in range(1, (pools or {}).get(role, 1) + 1)]


def role_of(name: str) -> str:
    """A pool's role from its process name: critical2 is a critical pool."""
    return name.rstrip("0123456789")


def app_processes(env: dict[str, str], log_dir: Path, web_port: int, concurrency: dict[str, int],
                  pools: dict[str, int] | None = None,
                  weights: CpuWeights | None = None) -> dict[str, ManagedProcess]:
    """web, the pools of `pool_names(pools)` (two critical pools mean a pool restart never leaves
    the P0 queue without a consumer), the scheduler; each started in its `weights` group. A
    second pool of a role runs as the Procfile's worker-p0b does: core.worker under its own node
    name (`<role><n>@host`)."""
    procs = {"web": harness.web({**env, "PGAPPNAME": "notifier-web"}, log_dir, web_port)}
    for role, name in pool_names(pools):
        index = ROLES.index(role)
        key = "NOTIFIER_WORKER_OPS_CONCURRENCY" if role == "ops" else f"NOTIFIER_WORKER_P{index}_CONCURRENCY"
        role_env = {**env, key: str(concurrency[role])}
        if name == role:
            procs[name] = harness.worker(role, role_env, log_dir)
        else:
            argv = [harness.PY, "-m", "core.worker", role]
            named = {**role_env, "NOTIFIER_WORKER_NAME": f"{name}@%h"}
            procs[name] = ManagedProcess(f"worker-{name}", argv, named, log_dir)
    procs["scheduler"] = harness.scheduler({**env, "PGAPPNAME": "notifier-scheduler"}, log_dir, interval=0.5)
    for name, proc in procs.items():
        proc.argv = weights.wrap(name, proc.argv) if weights else proc.argv
    return procs


@dataclass
class DatabaseBackends:
    """PostgreSQL's processes on this host, by the pool each serves (core.worker names its
    sessions `notifier-<role>`): their CPU goes into the sampler's table as `pg:<name>`, and with
    `renice`, a bulk pool's backends run at that pool's niceness, as the pool itself does (on one
    shared host; a production database has its own). Does nothing for a remote database."""

    renice: dict[str, int] = field(default_factory=dict)  # application name -> niceness
    reniced: set[int] = field(default_factory=set)
    refused: bool = False

    def processes(self) -> list[tuple[str, int]]:
        """(application name, or the backend type of a server process; pid) of each process."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(nullif(application_name, ''), backend_type), pid "
                           "FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
            rows = cursor.fetchall()
        for application, pid in rows:
            self._renice(application, pid)
        return rows

    def _renice(self, application: str, pid: int) -> None:
        nice = self.renice.get(application)
        if not nice or pid in self.reniced or self.refused:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
            self.reniced.add(pid)
        except (PermissionError, ProcessLookupError):
            self.refused = True  # not ours to renice (another user, or gone): CPU is still read


@dataclass
class Chaos:
    """SIGKILL a random worker child every `interval` s; every `main_every`-th kill, a whole pool
    (main process and children), restarted at once as a supervisor would. Also the supervisor:
    a process that exits on its own is restarted within a second (and recorded)."""

    procs: dict[str, ManagedProcess]
    interval: float
    main_every: int = 4
    roles: tuple[str, ...] = ROLES
    seed: int = 8
    started: float = field(default_factory=time.time)
    events: list[dict] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng, n, last_kill = random.Random(self.seed), 0, time.monotonic()
        while not self._stop.wait(1.0):
            self._supervise()
            if time.monotonic() - last_kill >= self.interval:
                n, last_kill = n + 1, time.monotonic()
                self._kill(rng, whole_pool=n % self.main_every == 0)

    def _supervise(self) -> None:
        """Restart any process that exited on its own, as systemd or a Procfile runner would."""
        for name, proc in self.procs.items():
            if proc.process is not None and proc.process.poll() is not None:
                code = proc.process.returncode
                proc.start()
                self.events.append({"t": time.time(), "kind": "exited-restarted", "role": name,
                                    "returncode": code})

    def _kill(self, rng: random.Random, *, whole_pool: bool) -> None:
        role = rng.choice(self.roles)
        proc = self.procs[role]
        children = [] if whole_pool else proc.children()
        if not children:
            # A threads pool has no child processes: its process is what a crash takes.
            proc.kill_group()
            proc.start()
            self.events.append({"t": time.time(), "kind": "kill-main", "role": role})
            return
        victim = rng.choice(children)
        victim.send_signal(signal.SIGKILL)
        self.events.append({"t": time.time(), "kind": "kill-child", "role": role, "pid": victim.pid})

    def start(self) -> Chaos:
        self._thread = threading.Thread(target=self.run, daemon=True, name="chaos")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop killing and supervising; returns once the thread can no longer restart a process."""
        self._stop.set()
        if getattr(self, "_thread", None) is not None:
            self._thread.join(timeout=30)


@dataclass
class Sampler:
    """Once a second: RSS and CPU per process tree, broker queue depth per priority."""

    procs: dict[str, ManagedProcess]
    depth: object  # callable () -> dict[label, int]
    database: DatabaseBackends | None = None
    peak_rss: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, dict[int, float]] = field(default_factory=dict)
    series: list[dict] = field(default_factory=list)
    _cpu_base: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        for name, proc in list(self.procs.items()):
            rss = 0
            for p in harness.process_tree(proc):
                try:
                    rss += p.memory_info().rss
                    times = p.cpu_times()
                    self.cpu.setdefault(name, {})[p.pid] = times.user + times.system
                except psutil.Error:
                    continue
            self.peak_rss[name] = max(self.peak_rss.get(name, 0), rss)
        self._sample_database()
        try:
            depth = self.depth()
        except Exception:  # noqa: BLE001 - broker down during the Redis restart: a gap
            depth = {}
        self.series.append({"t": time.time(), "depth": depth})

    def _sample_database(self) -> None:
        if self.database is None:
            return
        try:
            backends = self.database.processes()
        except Exception:  # noqa: BLE001 - the sampler outlives a database hiccup: a gap
            return
        for application, pid in backends:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            # From the first sample on: the server's own processes predate the run (a backend
            # started during it loses at most its first second).
            base = self._cpu_base.setdefault(pid, times.user + times.system)
            self.cpu.setdefault(f"pg:{application}", {})[pid] = times.user + times.system - base

    def run(self) -> None:
        try:
            while not self._stop.wait(1.0):
                self.sample()
        finally:
            if self.database is not None:
                from django.db import connection

                # This thread's own session (DatabaseBackends' query): Django closes the main
                # thread's only, and a session left open blocks the database's drop.
                connection.close()

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self.run, daemon=True, name="sampler")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)  # a sample under way finishes, then the session closes

    def cpu_seconds(self) -> dict[str, float]:
        return {name: round(sum(pids.values()), 1) for name, pids in self.cpu.items()}


def redis_depth(port: int, db: int = 0):
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, db=db, socket_timeout=2)

    def depth() -> dict[str, int]:
        # kombu's Redis transport keeps priority sub-queues as "<queue>\x06\x16<n>".
        return {label: sum(client.llen(k) for k in [q, *(f"{q}\x06\x16{p}" for p in (3, 6, 9))])
                for label, q in SEND_QUEUES.items()}
    return depth


def amqp_depth(url: str):
    from kombu import Connection

    def depth() -> dict[str, int]:
        with Connection(url, connect_timeout=2) as conn:
            channel = conn.channel()
            return {label: channel.queue_declare(q, passive=True).message_count
                    for label, q in SEND_QUEUES.items()}
    return depth
