"""Real web processes for API tests: the Procfile's web server on 127.0.0.1, test database."""

from __future__ import annotations

import time
from pathlib import Path

import requests

from testkit import processes


def web_server(port: int, env: dict[str, str], log_dir: Path, workers: int = 2) -> processes.ManagedProcess:
    return processes.web_server(env, log_dir, port, workers=workers)


def wait_until_serving(port: int, timeout: float = 90.0) -> None:
    """Until the server answers an HTTP request (any status), within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            requests.get(f"http://127.0.0.1:{port}/api/v1/messages/1", timeout=10)
            return
        except requests.RequestException:  # not listening yet, or still importing Django
            time.sleep(0.2)
    raise TimeoutError(f"the web on {port} did not start")


def post_otp(base_url: str, key: str, n: int, session: requests.Session | None = None,
             **extra: object) -> requests.Response:
    """POST /api/v1/messages: the `otp` template at critical priority to user<n>@example.com."""
    body = {"to": f"user{n}@example.com", "template": "otp", "priority": "critical",
            "context": {"name": "Ada", "code": str(n)}, **extra}
    return (session or requests).post(f"{base_url}/api/v1/messages", json=body, timeout=10,
                                      headers={"Authorization": f"Api-Key {key}"})
