"""ESP webhook endpoints: verify, store durably, answer 2xx, process on the webhook queue.

    POST /webhooks/ses/       SNS messages carrying SES events (and SubscriptionConfirmation)
    POST /webhooks/sendgrid/  SendGrid Signed Event Webhook (JSON array, ECDSA headers)
    POST /webhooks/mailgun/   Mailgun JSON webhooks (HMAC signature block, token replay guard)

Nothing is written before verification passes: a forged, tampered, stale or replayed request
gets a 4xx and changes nothing. If storing fails we answer 503 so the ESP retries (SNS, SendGrid
and Mailgun all retry non-2xx answers). No API key: the signature is the authentication.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.redis_client import get_redis, redis_key
from feedback.services.drain import webhook_task_schedule
from feedback.services.webhooks import webhook_delivery_store
from feedback.verification import Reason, WebhookVerificationError
from feedback.verification.sendgrid import SIGNATURE_HEADER, TIMESTAMP_HEADER
from feedback.verification.sns import SUBSCRIPTION_CONFIRMATION, UNSUBSCRIBE_CONFIRMATION
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


def _store_and_ack(provider: str, body: bytes, kind: str = "notification",
                   on_failure: Callable[[], None] | None = None) -> JsonResponse:
    try:
        delivery = webhook_delivery_store(provider=provider, body=body, kind=kind)
    except DatabaseError:
        logger.exception("could not store a verified %s webhook; answering 503", provider)
        if on_failure:
            on_failure()
        return _error(503, "storage_unavailable", "could not store the event; retry later")
    if kind == "notification":
        webhook_task_schedule(delivery_id=delivery.id)
    return JsonResponse({"stored": delivery.id}, status=200)


def _not_configured(provider: str, exc: Exception) -> JsonResponse:
    logger.error("%s webhook received but not configured: %s", provider, exc)
    return _error(503, "not_configured", f"{provider} webhook is not configured")


@csrf_exempt
@require_POST
def ses_webhook(request: HttpRequest) -> JsonResponse:
    body = request.body
    try:
        message = config.sns_verifier().verify(body)
    except WebhookVerificationError as err:
        return _rejected("ses", err)
    kind = message["Type"]
    if kind == SUBSCRIPTION_CONFIRMATION:
        return _confirm_subscription(message, body)
    if kind == UNSUBSCRIBE_CONFIRMATION:
        return _store_and_ack("ses", body, kind="unsubscribe_confirmation")
    return _store_and_ack("ses", body)


def _confirm_subscription(message: dict, body: bytes) -> JsonResponse:
    # Only reached for an allowlisted TopicArn (the verifier refuses others before any fetch);
    # the SubscribeURL must itself point at an SNS endpoint.
    url = message.get("SubscribeURL", "")
    if not isinstance(url, str) or not config.is_sns_url(url):
        return _error(403, "subscribe_url_not_allowed", "SubscribeURL is not an SNS endpoint")
    response = _store_and_ack("ses", body, kind="subscription_confirmation")
    if response.status_code != 200:
        return response
    try:
        config.sns_confirmer()(url)
    except Exception:
        logger.exception("SNS subscription confirmation failed for %s", message.get("TopicArn"))
        return _error(502, "confirmation_failed", "could not confirm the subscription")
    logger.info("confirmed SNS subscription to %s", message.get("TopicArn"))
    return response


@csrf_exempt
@require_POST
def sendgrid_webhook(request: HttpRequest) -> JsonResponse:
    try:
        verifier = config.sendgrid_verifier()
    except config.WebhookNotConfiguredError as exc:
        return _not_configured("sendgrid", exc)
    body = request.body
    try:
        verifier.verify(body, request.headers.get(SIGNATURE_HEADER), request.headers.get(TIMESTAMP_HEADER))
    except WebhookVerificationError as err:
        return _rejected("sendgrid", err)
    return _store_and_ack("sendgrid", body)


@csrf_exempt
@require_POST
def mailgun_webhook(request: HttpRequest) -> JsonResponse:
    try:
        verifier = config.mailgun_verifier()
    except config.WebhookNotConfiguredError as exc:
        return _not_configured("mailgun", exc)
    body = request.body
    try:
        payload = verifier.verify(body)
    except WebhookVerificationError as err:
        return _rejected("mailgun", err)
    token = payload["signature"]["token"]

    def forget_token() -> None:
        # The guard recorded the token; if we could not store the event, Mailgun's retry
        # carries the same token and must not be refused as a replay.
        get_redis().delete(redis_key("webhooks", "mailgun-token", token))

    return _store_and_ack("mailgun", body, on_failure=forget_token)
