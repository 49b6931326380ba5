"""F7 at the API: with PostgreSQL or Redis unreachable, a real web process answers 503 in the
error shape (with Retry-After), never a 500."""

from __future__ import annotations

import pytest
import requests

from clients.services import service_create
from testkit import processes
from testkit.ports import free_port
from tests.support import web


def _serve(spawn, tmp_path, **env: str) -> int:
    port = free_port()
    spawn(web.web_server(port, processes.subprocess_env(**env), tmp_path))
    web.wait_until_serving(port)
    return port


def _assert_503(port: int, key: str) -> None:
    for method, path, body in (("get", "/api/v1/messages/1", None),
                               ("post", "/api/v1/templates", {"name": "x", "subject": "s",
                                                              "html_body": "b"})):
        response = requests.request(method, f"http://127.0.0.1:{port}{path}", json=body, timeout=30,
                                    headers={"Authorization": f"Api-Key {key}"})
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "unavailable"
        assert int(response.headers["Retry-After"]) > 0


@pytest.mark.django_db(transaction=True)
def test_database_unreachable_is_a_503(spawn, tmp_path):
    _, key = service_create(name="svc")
    port = _serve(spawn, tmp_path, DATABASE_URL=f"postgres://postgres@127.0.0.1:{free_port()}/none")
    _assert_503(port, key)


@pytest.mark.django_db(transaction=True)
def test_redis_unreachable_is_a_503(spawn, tmp_path):
    _, key = service_create(name="svc")
    dead = f"redis://127.0.0.1:{free_port()}/0"
    port = _serve(spawn, tmp_path, REDIS_URL=dead, CELERY_BROKER_URL=dead)
    _assert_503(port, key)
