"""GET /healthz: can this process reach the database, Redis and the broker? 200 or 503."""

from __future__ import annotations

from celery import current_app
from django.db import connection
from django.http import HttpRequest, JsonResponse

from core.redis_client import get_redis


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis() -> None:
    get_redis().ping()


def _broker() -> None:
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


CHECKS = {"database": _database, "redis": _redis, "broker": _broker}


def healthz(request: HttpRequest) -> JsonResponse:
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure is reported, none is raised
            results[name] = f"error: {exc.__class__.__name__}: {exc}"[:300]
    healthy = all(value == "ok" for value in results.values())
    return JsonResponse({"status": "ok" if healthy else "unavailable", "checks": results},
                        status=200 if healthy else 503)
