"""Load of the million-email day, all through the public HTTP API of the web process (granian):
steady P0/P1 streams, scheduled P3 messages, and the P2 campaign launch."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

import requests

RETRIES = 6  # about 15 s of back-off: longer than a Redis restart


class ApiConnection:
    """One kept-alive HTTP/1.1 connection to the API on http.client: the load driver shares the
    machine with what it measures (the driver process used ~20% of a core at 70 requests/s in
    the 1M run, most of it requests' per-call machinery); a broken connection is reopened on
    the next call."""

    def __init__(self, url: str, key: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Authorization": f"Api-Key {key}", "Content-Type": "application/json"}
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: dict) -> tuple[int, str, float]:
        """(status, body, when the request was on the socket): the last tells the driver's own
        wait (this process runs ~100 threads) from the web's."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            self.conn.request("POST", path, body=json.dumps(body), headers=self.headers)
            written = time.time()
            response = self.conn.getresponse()
            return response.status, response.read().decode(errors="replace"), written
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise


@dataclass
class Sent:
    """One accepted API call: our message id, when the request started, its label, when the
    accepted attempt's request was written to the socket."""

    message_id: str
    started: float
    label: str
    send_at: float | None = None
    written: float | None = None


@dataclass
class Load:
    url: str
    key: str
    template: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    retried: int = 0
    sent: list[Sent] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _post(self, api: ApiConnection, label: str, priority: str, n: int,
              send_at: float | None = None) -> None:
        """POST one message; a 503 (Redis down) or a connection error is retried with the same
        idempotency key, as a client would; latency counts from the first attempt."""
        body = {"to": f"{label.lower()}-{n}@example.com", "template": self.template,
                "priority": priority, "context": {"name": f"{label} {n}"},
                "idempotency_key": f"{self.run_id}-{label}-{n}"}
        if send_at is not None:
            iso = datetime.fromtimestamp(send_at, UTC).isoformat()
            body["schedule"] = {"type": "scheduled", "send_at": iso}
        started, error = time.time(), {}
        for attempt in range(RETRIES):
            if attempt:
                self._stop.wait(min(0.25 * 2**attempt, 4.0))
            try:
                status, text, written = api.post("/api/v1/messages", body)
            except (OSError, http.client.HTTPException) as exc:
                error = {"error": repr(exc)[:200]}
                continue
            if status == 202:
                with self._lock:
                    self.sent.append(Sent(str(json.loads(text)["id"]), started, label, send_at, written))
                    self.retried += attempt > 0
                return
            error = {"status": status, "body": text[:200]}
            if status not in (502, 503, 504):
                break
        with self._lock:
            self.errors.append({"t": started, "label": label, **error})

    def _stream(self, label: str, priority: str, rate: float, offset: int, stride: int) -> None:
        """One of a stream's `stride` threads: Poisson arrivals at rate / stride, so the stream's
        are Poisson at `rate` (until 2026-12-02 every thread posted on the same beat: a 20/s
        stream arrived as 20 requests within ~0.1 s of each second, P1's 50 with them)."""
        api, n = ApiConnection(self.url, self.key), offset
        arrivals = random.Random(f"{self.run_id}-{label}-{offset}")  # reproducible per thread
        next_at = time.monotonic() + arrivals.expovariate(rate / stride)
        while True:
            delay = next_at - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            if delay < -5:  # far behind (API stalled): do not burst to catch up
                next_at = time.monotonic()
            if self._stop.is_set():
                return
            self._post(api, label, priority, n)
            n += stride
            next_at += arrivals.expovariate(rate / stride)

    def stream(self, label: str, priority: str, rate: float, threads: int) -> None:
        for i in range(threads):
            self._spawn(self._stream, label, priority, rate, i, threads)

    def _scheduled(self, slots: list[float], offset: int, stride: int, ahead: float, lead: float) -> None:
        api = ApiConnection(self.url, self.key)
        for n in range(offset, len(slots), stride):
            if self._stop.wait(max(0.0, slots[n] - ahead - time.time())):
                return
            send_at = max(slots[n], time.time() + lead)  # always in the future when posted
            self._post(api, "P3", "low", n, send_at)

    def scheduled(self, count: int, first_due: float, last_due: float, threads: int,
                  lead: float = 10.0) -> None:
        """`count` P3 messages due evenly between the two instants (epoch seconds), each posted
        as long before its due time as the first is from now: at the same even rate as they fall
        due, not as fast as the threads go (a burst of ~60/s the web tier took from P0 and P1)."""
        step = (last_due - first_due) / max(count - 1, 1)
        slots = [first_due + i * step for i in range(count)]
        ahead = max(first_due - time.time(), lead)
        for i in range(threads):
            self._spawn(self._scheduled, slots, i, threads, ahead, lead)

    def warm_up(self, streams: list[tuple[str, str, float, int]], seconds: float) -> None:
        """Run `streams` ((label, priority, rate, threads)) for `seconds` and wait for their last
        answers: a deployment's web and pools are warm when a campaign launches, the scenario's
        start every process just before. Their messages count in delivery (lost, duplicates)
        under their own labels, not in any latency figure."""
        warm = Load(self.url, self.key, self.template, run_id=f"{self.run_id}w", sent=self.sent,
                    errors=self.errors, _lock=self._lock)
        for label, priority, rate, threads in streams:
            warm.stream(label, priority, rate, threads)
        time.sleep(seconds)
        warm.stop()
        self.retried += warm.retried

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=40)


def campaign_launch(url: str, key: str, template_id: int, list_id: int) -> tuple[int, float]:
    """POST /api/v1/notifications/email to the list at normal priority: (campaign id, time)."""
    started = time.time()
    response = requests.post(
        f"{url}/api/v1/notifications/email", timeout=60,
        json={"name": "million-day", "template_id": template_id, "priority": "normal",
              "recipients": {"type": "list", "list_id": list_id}},
        headers={"Authorization": f"Api-Key {key}"})
    if response.status_code != 202:
        raise RuntimeError(f"campaign launch: {response.status_code} {response.text[:500]}")
    body = response.json()
    return int(body.get("id") or body.get("campaign_id")), started
