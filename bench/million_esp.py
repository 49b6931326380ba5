"""The two fake ESPs of the million-email day, each with a ledger the scenario can read back.

- primary: tests.fakes.FakeSendGrid (batch API, real v3 wire format) in its own process so it
  does not share the scenario's GIL; commands (refuse for N seconds, stop) go through a queue
  and its ledger comes back as a JSON-lines file of (our message id, accepted_at epoch).
- secondary: Postfix's smtp-sink on 127.0.0.1 dumping one file per message (`-d`); the
  X-Notifier-Message-Id header identifies the message and the file's mtime is the acceptance.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SMTP_SINK = "/usr/sbin/smtp-sink"
MESSAGE_ID_HEADER = re.compile(rb"^X-Notifier-Message-Id:\s*(\S+)", re.MULTILINE | re.IGNORECASE)


def _serve_sendgrid(ready: mp.Queue, commands: mp.Queue, out_path: str) -> None:
    from tests.fakes import FakeSendGrid

    fake = FakeSendGrid(api_key=None).start()
    ready.put(fake.url)
    while True:
        command, arg = commands.get()
        if command == "refuse":
            fake.faults.refuse(for_seconds=float(arg))
        elif command == "stop":
            entries = fake.ledger.entries()
            with open(out_path, "w") as out:
                for entry in entries:
                    out.write(json.dumps([entry.message_id, entry.accepted_at]) + "\n")
                out.write(json.dumps({"outcomes": fake.ledger.outcomes()}) + "\n")
            fake.stop()
            ready.put("stopped")
            return


class PrimaryEsp:
    """FakeSendGrid in a spawned process; `refuse(seconds)` and `stop_and_read()`."""

    def __init__(self, out_path: Path) -> None:
        ctx = mp.get_context("spawn")
        self.out_path = out_path
        self._ready, self._commands = ctx.Queue(), ctx.Queue()
        self.process = ctx.Process(target=_serve_sendgrid, daemon=True,
                                   args=(self._ready, self._commands, str(out_path)))
        self.url = ""

    def start(self) -> PrimaryEsp:
        self.process.start()
        self.url = self._ready.get(timeout=60)
        return self

    def refuse(self, seconds: float) -> None:
        self._commands.put(("refuse", seconds))

    def stop_and_read(self, timeout: float = 300) -> tuple[list[tuple[str, float]], dict]:
        if self.process.is_alive():
            self._commands.put(("stop", None))
            self._ready.get(timeout=timeout)
            self.process.join(timeout=10)
        entries, outcomes = [], {}
        with open(self.out_path) as lines:
            for line in lines:
                row = json.loads(line)
                if isinstance(row, dict):
                    outcomes = row["outcomes"]
                else:
                    entries.append((str(row[0]), float(row[1])))
        return entries, outcomes


class SecondaryEsp:
    """Postfix smtp-sink, one dump file per accepted message."""

    def __init__(self, port: int, log_path: Path) -> None:
        self.port, self.log_path = port, log_path
        self.dump_dir = Path("/nonexistent")
        self.process: subprocess.Popen | None = None

    def start(self) -> SecondaryEsp:
        # smtp-sink drops to `nobody` after binding: the dump directory must be reachable by it
        # (pytest's tmp_path lives under a 0700 directory), so it goes under /tmp.
        self.dump_dir = Path(tempfile.mkdtemp(prefix="million-smtp-"))
        os.chmod(self.dump_dir, 0o777)
        argv = [SMTP_SINK, "-d", f"{self.dump_dir}/%H%M%S.", f"127.0.0.1:{self.port}", "1000"]
        if os.geteuid() == 0:
            argv[1:1] = ["-u", "nobody"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        time.sleep(0.3)
        if self.process.poll() is not None:
            raise RuntimeError(f"smtp-sink exited: {self.log_path.read_text()[-2000:]}")
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def read(self) -> tuple[list[tuple[str, float]], int]:
        """(message id, mtime) per dump, and the count of dumps without our header; then the
        dumps are deleted."""
        entries, unknown = [], 0
        for path in self.dump_dir.iterdir():
            with open(path, "rb") as dump:
                head = dump.read(16384)
            match = MESSAGE_ID_HEADER.search(head)
            if match:
                entries.append((match.group(1).decode(), path.stat().st_mtime))
            else:
                unknown += 1
        shutil.rmtree(self.dump_dir, ignore_errors=True)
        return entries, unknown
