"""ESP webhook endpoints: verify, store durably, answer 2xx, process on the webhook queue.

    POST /webhooks/ses/       SNS messages carrying SES events (and SubscriptionConfirmation)
    POST /webhooks/sendgrid/  SendGrid Signed Event Webhook (JSON array, ECDSA headers)
    POST /webhooks/mailgun/   Mailgun JSON webhooks (HMAC signature block, token replay guard)

One view serves them all: what differs per ESP (its verifier, what a payload is, what to undo
when storing fails) is its `EspWebhook` (delivery/providers/<esp>/webhook.py).

Nothing is written before verification passes: a forged, tampered, stale or replayed request
gets a 4xx and changes nothing. If storing fails we answer 503 so the ESP retries (SNS, SendGrid
and Mailgun all retry non-2xx answers). No API key: the signature is the authentication.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from delivery.providers.webhooks import (
    NOTIFICATION,
    SUBSCRIPTION_CONFIRMATION,
    EspWebhook,
    Reason,
    WebhookNotConfiguredError,
    WebhookVerificationError,
)
from feedback.services.drain import webhook_task_schedule
from feedback.services.webhooks import webhook_delivery_store
from feedback.webhooks import config

logger = logging.getLogger(__name__)

# Our fault, not the sender's: answer 5xx so the ESP tries again later.
_RETRYABLE = {Reason.CERT_FETCH_FAILED}
_FORBIDDEN = {
    Reason.BAD_SIGNATURE, Reason.TOPIC_NOT_ALLOWED, Reason.CERT_URL_NOT_HTTPS,
    Reason.CERT_HOST_NOT_ALLOWED, Reason.CERT_PATH_NOT_ALLOWED, Reason.BAD_CERTIFICATE,
    Reason.REPLAYED_TOKEN, Reason.MISSING_SIGNATURE,
}


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "fields": {}}}, status=status)


def _rejected(provider: str, err: WebhookVerificationError) -> JsonResponse:
    logger.warning("rejected %s webhook: %s", provider, err)
    if err.reason in _RETRYABLE:
        return _error(503, err.reason, "could not verify the request now; retry later")
    status = 403 if err.reason in _FORBIDDEN else 400
    return _error(status, err.reason, "webhook verification failed")


def _store_and_ack(provider: str, body: bytes, kind: str = NOTIFICATION,
                   on_failure: Callable[[], None] | None = None) -> JsonResponse:
    try:
        delivery = webhook_delivery_store(provider=provider, body=body, kind=kind)
    except DatabaseError:
        logger.exception("could not store a verified %s webhook; answering 503", provider)
        if on_failure:
            on_failure()
        return _error(503, "storage_unavailable", "could not store the event; retry later")
    if kind == NOTIFICATION:
        webhook_task_schedule(delivery_id=delivery.id)
    return JsonResponse({"stored": delivery.id}, status=200)


def _not_configured(provider: str, exc: Exception) -> JsonResponse:
    logger.error("%s webhook received but not configured: %s", provider, exc)
    return _error(503, "not_configured", f"{provider} webhook is not configured")


@csrf_exempt
@require_POST
def esp_webhook(request: HttpRequest, esp: str) -> JsonResponse:
    """POST /webhooks/<esp>/: the same steps for every ESP, with its own verifier and kinds."""
    webhook = config.esp_webhook(esp)
    try:
        verifier = config.verifier(esp)
    except WebhookNotConfiguredError as exc:
        return _not_configured(esp, exc)
    body = request.body
    try:
        payload = verifier.verify_request(body, request.headers)
    except WebhookVerificationError as err:
        return _rejected(esp, err)
    kind = webhook.kind(payload)
    if kind == SUBSCRIPTION_CONFIRMATION:
        return _confirm_subscription(esp, webhook, payload, body)
    return _store_and_ack(esp, body, kind=kind, on_failure=lambda: webhook.on_store_failure(payload))


def _confirm_subscription(esp: str, webhook: EspWebhook, payload: Any, body: bytes) -> JsonResponse:
    # Only reached for a verified request (SNS: an allowlisted TopicArn, refused before any
    # fetch otherwise); the URL to fetch must itself point at the ESP.
    url = webhook.handshake.confirmation_url(payload) if webhook.handshake else None
    if url is None:
        return _error(403, "subscribe_url_not_allowed", "the subscription URL does not point at the ESP")
    response = _store_and_ack(esp, body, kind=SUBSCRIPTION_CONFIRMATION)
    if response.status_code != 200:
        return response
    try:
        config.subscription_confirmer(esp)(url)
    except Exception:
        logger.exception("%s subscription confirmation failed", esp)
        return _error(502, "confirmation_failed", "could not confirm the subscription")
    logger.info("confirmed %s subscription", esp)
    return response
