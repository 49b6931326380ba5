"""The ESPs the benchmarks send to, each with a ledger the script reads back at the end.

- FakeEspProcess: a fake HTTP ESP of testkit/fakes (SendGrid or Mailgun, real wire format) in a
  process of its own, so it does not share the script's GIL; commands (refuse for N seconds,
  stop) go through a queue and its ledger comes back as a JSON-lines file of (our message id,
  accepted_at epoch). A fake SendGrid can post signed `processed` events of what it accepted
  to the web's webhook (`events`), as SendGrid's Event Webhook does. Both answer their ESP's
  search by message (Mailgun events, SendGrid Email Activity at 6 requests a minute) from what
  they accepted, so the schedulers settle AMBIGUOUS sends by lookup (delivery/services/
  esp_lookup.py); `lookup_lag(seconds)` makes an accepted message stay out of the search that
  long (eventual consistency), `lookup_refuse()` answers as an account without the lookup.
- SmtpSink: Postfix's smtp-sink on 127.0.0.1 dumping one file per message (`-d`); the
  X-Notifier-Message-Id header identifies the message and the file's mtime is the acceptance.
"""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import queue
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from testkit.processes import ManagedProcess

SMTP_SINK = "/usr/sbin/smtp-sink"
T = TypeVar("T")
MESSAGE_ID_HEADER = re.compile(rb"^X-Notifier-Message-Id:\s*(\S+)", re.MULTILINE | re.IGNORECASE)


# The fake keeps every acceptance in memory (over a million objects in the 1M day), and each of
# CPython's full collections walks them all: 2.4 s at 1M entries, measured. Such a pause stopped
# every sender at once (a 0.77 s gap in the ledger, P0 messages at 0.6-0.8 s: decision 80); a
# stand-in for a remote ESP must not put its own pauses into our figures. Moving what exists to
# the permanent generation every few seconds leaves each collection only the objects since.
FREEZE_EVERY_SECONDS = 2.0


# A SendGrid account posts its events in batches (up to ~1,000 per request); so does the fake.
EVENTS_EVERY_SECONDS = 0.5
EVENTS_PER_REQUEST = 1000


class EventPoster:
    """Posts a signed SendGrid `processed` event for every message the fake accepted, to the
    web's webhook, as SendGrid's Event Webhook does: what lets the platform settle AMBIGUOUS
    sends from the ESP's evidence (decision 89) inside a benchmark run."""

    def __init__(self, fake: object, url: str, private_key_pem: bytes) -> None:
        import threading

        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        from testkit.webhook_signing import SendGridTestSigner

        self.fake, self.url = fake, url
        self.signer = SendGridTestSigner(load_pem_private_key(private_key_pem, password=None))
        self.posted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="event-poster")

    def start(self) -> EventPoster:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        import requests

        session = requests.Session()
        while not self._stop.wait(EVENTS_EVERY_SECONDS):
            entries = self.fake.ledger.entries()[self.posted:]
            for start in range(0, len(entries), EVENTS_PER_REQUEST):
                chunk = entries[start:start + EVENTS_PER_REQUEST]
                while not self._post(session, chunk) and not self._stop.is_set():
                    time.sleep(1)  # the web is restarting or the database is away: again
                self.posted += len(chunk)

    def _post(self, session: object, entries: list) -> bool:
        body = json.dumps([_processed_event(entry) for entry in entries]).encode()
        headers = {"Content-Type": "application/json", **self.signer.sign(body)}
        try:
            return session.post(self.url, data=body, headers=headers, timeout=30).status_code < 300
        except OSError:
            return False


def _processed_event(entry: object) -> dict:
    from delivery.providers.base import MESSAGE_ID_KEY

    return {"email": entry.recipient, "timestamp": int(entry.accepted_at), "event": "processed",
            "sg_event_id": f"processed-{entry.provider_message_id}-{entry.message_id}",
            "sg_message_id": entry.provider_message_id, MESSAGE_ID_KEY: entry.message_id}


def _serve(provider: str, ready: mp.Queue, commands: mp.Queue, out_path: str,
           events: tuple[str, bytes] | None = None) -> None:
    from testkit.fakes import FakeMailgun, FakeSendGrid
    from testkit.fakes.http_base import HttpReply

    fake = (FakeSendGrid if provider == "sendgrid" else FakeMailgun)(api_key=None).start()
    poster = EventPoster(fake, *events).start() if events else None
    ready.put(fake.url)
    while True:
        try:
            command, arg = commands.get(timeout=FREEZE_EVERY_SECONDS)
        except queue.Empty:
            gc.freeze()
            continue
        if command == "refuse":
            fake.faults.refuse(for_seconds=float(arg))
        elif command == "lookup_lag":
            fake.lookup_lag_seconds = float(arg)
        elif command == "lookup_refuse":
            fake.lookup_refusal = HttpReply(403, b'{"errors": [{"message": "access forbidden"}]}',
                                            {"Content-Type": "application/json"})
        elif command == "stop":
            if poster is not None:
                poster.stop()
            entries = fake.ledger.entries()
            with open(out_path, "w") as out:
                for entry in entries:
                    out.write(json.dumps([entry.message_id, entry.accepted_at]) + "\n")
                out.write(json.dumps({"outcomes": fake.ledger.outcomes()}) + "\n")
            fake.stop()
            ready.put("stopped")
            return


class FakeEspProcess:
    """A fake `provider` ("sendgrid" or "mailgun") in a spawned process; `refuse(seconds)`,
    `lookup_lag(seconds)`, `lookup_refuse()` and `stop_and_read()`."""

    def __init__(self, provider: str, out_path: Path, events: tuple[str, bytes] | None = None) -> None:
        """`events`: (webhook URL, PEM private key) to post SendGrid events of what it accepts."""
        ctx = mp.get_context("spawn")
        self.out_path = out_path
        self._ready, self._commands = ctx.Queue(), ctx.Queue()
        self.process = ctx.Process(target=_serve, daemon=True,
                                   args=(provider, self._ready, self._commands, str(out_path), events))
        self.url = ""

    def start(self) -> FakeEspProcess:
        self.process.start()
        self.url = self._ready.get(timeout=60)
        return self

    def refuse(self, seconds: float) -> None:
        self._commands.put(("refuse", seconds))

    def lookup_lag(self, seconds: float) -> None:
        self._commands.put(("lookup_lag", seconds))

    def lookup_refuse(self) -> None:
        self._commands.put(("lookup_refuse", None))

    def kill(self) -> None:
        if self.process.pid is not None:
            self.process.kill()

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


def through_fake_esp(provider: str, send: Callable[[str], T]) -> tuple[T, list[tuple[str, float]]]:
    """`send(url)` against a FakeEspProcess of `provider`: what it returned, and the ESP's ledger
    (which the ESP writes to a temporary file, gone afterwards)."""
    with tempfile.TemporaryDirectory(prefix="bench-esp-") as tmp:
        esp = FakeEspProcess(provider, Path(tmp) / "ledger.jsonl").start()
        try:
            result = send(esp.url)
            entries, _ = esp.stop_and_read()
        finally:
            esp.kill()
    return result, entries


def ledger_counts(entries: list[tuple[str, float]]) -> tuple[int, int]:
    """(distinct message ids, ids accepted more than once) of a ledger."""
    per_id = Counter(message_id for message_id, _ in entries)
    return len(per_id), sum(1 for n in per_id.values() if n > 1)


class SmtpSink:
    """Postfix smtp-sink, one dump file per accepted message."""

    def __init__(self, port: int, logs: Path) -> None:
        self.port, self.logs = port, logs
        self.dump_dir = Path("/nonexistent")
        self.server: ManagedProcess | None = None

    def start(self) -> SmtpSink:
        # smtp-sink drops to `nobody` after binding: the dump directory must be reachable by it
        # (pytest's tmp_path lives under a 0700 directory), so it goes under /tmp.
        self.dump_dir = Path(tempfile.mkdtemp(prefix="million-smtp-"))
        os.chmod(self.dump_dir, 0o777)
        argv = [SMTP_SINK, "-d", f"{self.dump_dir}/%H%M%S.", f"127.0.0.1:{self.port}", "1000"]
        if os.geteuid() == 0:
            argv[1:1] = ["-u", "nobody"]
        self.server = ManagedProcess("smtp-sink", argv, dict(os.environ), self.logs).start()
        time.sleep(0.3)
        if self.server.process.poll() is not None:
            raise RuntimeError(f"smtp-sink exited: {self.server.log()[-2000:]}")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(timeout=10)

    def kill(self) -> None:
        if self.server is not None:
            self.server.kill_group()

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
