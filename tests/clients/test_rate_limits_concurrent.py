"""F19 across processes: two web servers (2 workers x 4 threads each) share one budget.

Hundreds of parallel requests from two clients are spread over both servers; the limited client
gets exactly its quota (the Lua script is atomic, the clock is Redis's), the other none refused.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from clients.services import service_create
from testkit import processes
from testkit.ports import free_port
from tests.support import web

QUOTA = 40
PER_CLIENT = 300


@pytest.mark.django_db(transaction=True)
def test_limited_client_gets_exactly_its_quota_across_processes(spawn, tmp_path):
    _, limited_key = service_create(name="flood", rate_limit=f"{QUOTA}/min")
    _, calm_key = service_create(name="calm", rate_limit="10000/min")
    env = processes.subprocess_env()
    ports = [free_port(), free_port()]
    for port in ports:
        spawn(web.web_server(port, env, tmp_path))
    for port in ports:
        web.wait_until_serving(port)

    jobs = [(key, ports[n % 2]) for n in range(PER_CLIENT) for key in (limited_key, calm_key)]

    def call(job: tuple[str, int]) -> tuple[str, int]:
        key, port = job
        response = requests.get(f"http://127.0.0.1:{port}/api/v1/messages/999999",
                                headers={"Authorization": f"Api-Key {key}",
                                         "X-Forwarded-For": "203.0.113.9"}, timeout=60)
        return key, response.status_code

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(call, jobs))
    elapsed = time.monotonic() - started

    limited = Counter(code for key, code in results if key == limited_key)
    calm = Counter(code for key, code in results if key == calm_key)
    assert elapsed < 60, "the window is a minute: the test must finish inside it"
    assert limited == {404: QUOTA, 429: PER_CLIENT - QUOTA}
    assert calm == {404: PER_CLIENT}
