"""The Procfile's web server (`make run`'s) logs every API call and every error, but not the
requests nobody reads: successful static files, the dashboard's 2-s poll, health probes."""

from __future__ import annotations

import pytest
import requests

from clients.services import service_create
from testkit import processes
from testkit.ports import free_port
from testkit.waiting import wait_for
from tests.support import web


@pytest.mark.django_db(transaction=True)
def test_the_access_log_leaves_out_static_files_dashboard_polls_and_health_probes(spawn, tmp_path):
    _, key = service_create(name="svc")
    port = free_port()
    server = spawn(web.web_server(port, processes.subprocess_env(), tmp_path, workers=1))
    web.wait_until_serving(port)
    base = f"http://127.0.0.1:{port}"
    quiet = ["/static/admin/css/base.css", "/healthz", "/dashboard/data.json"]
    logged = ["/api/v1/messages/424242", "/static/admin/css/no-such-file.css", "/dashboard/"]
    for path in quiet + logged:
        requests.get(base + path, headers={"Authorization": f"Api-Key {key}"}, timeout=30,
                     allow_redirects=False)
    # The requests above were answered, so they were logged (or not) already: read the log once
    # the last one is there.
    assert wait_for(lambda: f"GET {logged[-1]} " in server.log(), timeout=10), server.log()
    log = server.log()
    assert [path for path in logged if f'"GET {path} ' not in log] == [], log
    assert [path for path in quiet if f'"GET {path} ' in log] == [], log
