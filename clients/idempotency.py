"""`Idempotency-Key` for every POST that creates something, as a one-line decorator or mixin.

    class WidgetCreateApi(APIView):
        @idempotent
        def post(self, request): ...

    class WidgetCreateApi(IdempotentMixin, APIView): ...      # every POST of the view

Semantics (as Stripe's and the IETF draft-ietf-httpapi-idempotency-key-header):
- no header: the request runs as usual;
- same service + key + same request (method, path, JSON body): the first 2xx response is
  replayed (status and body) with `Idempotent-Replayed: true`, and nothing runs again;
- same key, different request: 409;
- same key while the first is still running: the duplicate waits for the first (at most
  NOTIFIER_IDEMPOTENCY_WAIT_SECONDS, then 409 with Retry-After) and replays its answer, so
  concurrent duplicates cannot both run;
- a 4xx/5xx first answer is not kept: the caller may fix the request and retry with the key.
Records live 24 h (NOTIFIER_IDEMPOTENCY_TTL_SECONDS) in PostgreSQL (the system of record). The
record is inserted in the handler's own transaction and is the lock: a duplicate's INSERT waits
on the uncommitted unique row. A first request that dies (a crash, a database outage) rolls the
record back with its work, so a client retrying through an outage runs again at once instead of
meeting an orphaned "in progress" row (decision 101).
Redis is a fast path for replays only and is best-effort (a Redis outage falls back to SQL):

    notifier:idem-http:<service id>:<sha256 of key>   JSON {fp, status, body}, TTL 24 h
    $ redis-cli GET notifier:idem-http:svc_0123456789abcdef:9f86d0...
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from clients.caller import Caller
from clients.models import IdempotencyRecord, Service
from core.redis_client import get_redis, redis_key

logger = logging.getLogger(__name__)
HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout expired


class IdempotencyConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _validated_key(raw: str) -> str:
    if not (1 <= len(raw) <= 255) or not raw.isascii() or not raw.isprintable():
        raise serializers.ValidationError(
            {HEADER: ["Must be 1-255 printable ASCII characters (a UUID is ideal)."]}
        )
    return raw


def request_fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def _cache_key(service: Service, key: str) -> str:
    return redis_key("idem-http", service.pk, hashlib.sha256(key.encode()).hexdigest())


def _cache_get(service: Service, key: str) -> dict | None:
    try:
        raw = get_redis().get(_cache_key(service, key))
    except redis.RedisError as exc:
        logger.warning("idempotency fast path unavailable: %s", exc)
        return None
    return json.loads(raw) if raw else None


def _cache_put(service: Service, key: str, record: IdempotencyRecord) -> None:
    payload = {"fp": record.fingerprint, "status": record.status_code, "body": record.response_body}
    try:
        get_redis().set(_cache_key(service, key), json.dumps(payload),
                        ex=settings.NOTIFIER_IDEMPOTENCY_TTL_SECONDS)
    except redis.RedisError as exc:
        logger.warning("idempotency fast path unavailable: %s", exc)


def _replay(fingerprint: str, stored_fp: str, status_code: int, body: Any) -> Response:
    if stored_fp != fingerprint:
        raise IdempotencyConflict(f"This {HEADER} was used with a different request.")
    return Response(body, status=status_code, headers={REPLAYED_HEADER: "true"})


def _still_running() -> IdempotencyConflict:
    exc = IdempotencyConflict(f"A request with this {HEADER} is still in progress; retry later.")
    exc.wait = 1
    return exc


def _record_insert(*, service: Service, key: str, fingerprint: str) -> IdempotencyRecord:
    """Insert the record, waiting for a concurrent first request's transaction to end.

    Raises IntegrityError when a record is committed, or the 409 when the first request runs
    longer than the wait. SET LOCAL lives in the savepoint: released, it would last to the end
    of the transaction, so it is reset; rolled back, it goes with the savepoint.
    """
    now = timezone.now()
    expires = now + timedelta(seconds=settings.NOTIFIER_IDEMPOTENCY_TTL_SECONDS)
    wait_ms = max(1, int(settings.NOTIFIER_IDEMPOTENCY_WAIT_SECONDS * 1000))
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{wait_ms}ms"])
            record = IdempotencyRecord.objects.create(
                client=service, key=key, fingerprint=fingerprint, locked_at=now, expires_at=expires
            )
            cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
            return record
    except OperationalError as exc:
        if getattr(exc.__cause__, "pgcode", None) == LOCK_NOT_AVAILABLE:
            raise _still_running() from None
        raise


def idempotency_record_claim(*, service: Service, key: str, fingerprint: str
                             ) -> IdempotencyRecord | Response:
    """The new record to run under, or the stored response to replay. Call it inside the
    transaction that runs the request: the uncommitted record is the lock."""
    for _ in range(2):
        try:
            return _record_insert(service=service, key=key, fingerprint=fingerprint)
        except IntegrityError:
            existing = IdempotencyRecord.objects.filter(client=service, key=key).first()
        if existing is None:
            continue  # the other request failed and rolled its record back
        if existing.expires_at <= timezone.now() or existing.status_code is None:
            # Expired, or left "in progress" by a release that committed the record before the
            # work (decision 101 made that impossible): free the key.
            IdempotencyRecord.objects.filter(pk=existing.pk).delete()
            continue
        _cache_put(service, key, existing)
        return _replay(fingerprint, existing.fingerprint, existing.status_code, existing.response_body)
    raise IdempotencyConflict(f"This {HEADER} could not be claimed; retry.")


def run_idempotently(handler: Callable[[], Response], request: Request) -> Response:
    raw = request.META.get("HTTP_IDEMPOTENCY_KEY")
    caller = request.user
    if raw is None or not isinstance(caller, Caller):
        return handler()
    service = caller.service
    key = _validated_key(raw)
    fingerprint = request_fingerprint(request)
    cached = _cache_get(service, key)
    if cached:
        return _replay(fingerprint, cached["fp"], cached["status"], cached["body"])
    with transaction.atomic():
        claimed = idempotency_record_claim(service=service, key=key, fingerprint=fingerprint)
        if isinstance(claimed, Response):
            return claimed
        response = handler()
        if 200 <= response.status_code < 300:
            claimed.status_code = response.status_code
            # Through the JSON renderer, so dates and decimals store as they were sent.
            claimed.response_body = json.loads(JSONRenderer().render(response.data))
            claimed.save(update_fields=["status_code", "response_body"])
        else:
            claimed.delete()  # not a success: the caller may correct the request and reuse the key
    if claimed.status_code is not None:
        _cache_put(service, key, claimed)
    return response


def idempotent(method: Callable[..., Response]) -> Callable[..., Response]:
    """Decorate a view's post(): honours the Idempotency-Key header."""

    @functools.wraps(method)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        return run_idempotently(lambda: method(view, request, *args, **kwargs), request)

    wrapper.idempotent = True  # type: ignore[attr-defined]
    return wrapper


class IdempotentMixin:
    """Makes every POST of a DRF view honour Idempotency-Key (put it before APIView)."""

    # The marker the OpenAPI schema reads (core/api/schema.py) to document the header and the
    # 409, as `idempotent` on a decorated handler: the platform never imports this app.
    idempotent = True

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        post = getattr(self, "post", None)
        if request.method == "POST" and post and not getattr(post, "idempotent", False):
            self.post = functools.partial(run_idempotently_bound, post)


def run_idempotently_bound(post: Callable[..., Response], request: Request, *args: Any,
                           **kwargs: Any) -> Response:
    return run_idempotently(lambda: post(request, *args, **kwargs), request)
