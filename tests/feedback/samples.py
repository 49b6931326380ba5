"""Realistic provider payloads (documented shapes) about *our* messages, for webhook tests.

SES: "Examples of event data that Amazon SES publishes to Amazon SNS" (Bounce, Complaint,
Delivery, Open, Click). SendGrid: "Event Webhook Reference" (JSON array). Mailgun: webhook
"event-data" samples. Each builder tags the event with our message id the way the sender does
(SES message tag, SendGrid custom_args, Mailgun user-variables).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from delivery.providers.base import MESSAGE_ID_KEY

SES_KINDS = ("Delivery", "Open", "Click", "Bounce", "Complaint")


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def ses_event(kind: str, *, message_id: int, recipient: str, when: datetime,
              bounce_type: str = "Permanent") -> dict[str, Any]:
    mail = {
        "timestamp": _iso(when),
        "source": "Notifier <notifier@example.com>",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/example.com",
        "sendingAccountId": "123456789012",
        "messageId": f"0100018c-{message_id:08d}-ses",
        "destination": [recipient],
        "headersTruncated": False,
        "commonHeaders": {"from": ["notifier@example.com"], "to": [recipient], "subject": "Hi"},
        "tags": {"ses:configuration-set": ["notifier"], MESSAGE_ID_KEY: [str(message_id)]},
    }
    details: dict[str, dict[str, Any]] = {
        "Delivery": {"delivery": {"timestamp": _iso(when), "processingTimeMillis": 546,
                                  "recipients": [recipient], "smtpResponse": "250 2.6.0 Message received",
                                  "reportingMTA": "a8-70.smtp-out.amazonses.com"}},
        "Open": {"open": {"ipAddress": "192.0.2.1", "timestamp": _iso(when),
                          "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 10_3_3 like Mac OS X)"}},
        "Click": {"click": {"ipAddress": "192.0.2.1", "link": "https://example.com/offer",
                            "linkTags": {}, "timestamp": _iso(when), "userAgent": "Mozilla/5.0"}},
        "Bounce": {"bounce": {"bounceType": bounce_type, "bounceSubType": "General",
                              "bouncedRecipients": [{"emailAddress": recipient, "action": "failed",
                                                     "status": "5.1.1",
                                                     "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
                              "timestamp": _iso(when), "feedbackId": f"fb-{uuid.uuid4()}",
                              "reportingMTA": "dsn; mta.example.com"}},
        "Complaint": {"complaint": {"feedbackId": f"fb-{uuid.uuid4()}", "complainedRecipients":
                                    [{"emailAddress": recipient}], "timestamp": _iso(when),
                                    "userAgent": "Mozilla/5.0", "complaintFeedbackType": "abuse",
                                    "arrivalDate": _iso(when)}},
    }
    return {"eventType": kind, **details[kind], "mail": mail}


SENDGRID_KINDS = ("delivered", "open", "click", "bounce", "spamreport", "unsubscribe")


def sendgrid_event(kind: str, *, message_id: int, recipient: str, when: datetime, event_id: str,
                   bounce_type: str = "bounce") -> dict[str, Any]:
    event: dict[str, Any] = {
        "email": recipient,
        "timestamp": int(when.timestamp()),
        "smtp-id": f"<sg-{message_id}@ismtpd-555>",
        "event": kind,
        "category": ["campaign"],
        "sg_event_id": event_id,
        "sg_message_id": f"sg{message_id:010d}.filter0001.16648.5515E0B88.0",
        MESSAGE_ID_KEY: str(message_id),
    }
    extra: dict[str, dict[str, Any]] = {
        "delivered": {"response": "250 OK"},
        "open": {"useragent": "Mozilla/4.0", "ip": "192.0.2.1", "sg_machine_open": False},
        "click": {"useragent": "Mozilla/4.0", "ip": "192.0.2.1", "url": "https://example.com/offer"},
        "bounce": {"reason": "550 5.1.1 unknown recipient", "status": "5.1.1", "type": bounce_type},
    }
    return {**event, **extra.get(kind, {})}


MAILGUN_KINDS = ("delivered", "opened", "clicked", "failed", "complained", "unsubscribed")


def mailgun_event_data(kind: str, *, message_id: int, recipient: str, when: datetime,
                       event_id: str, severity: str = "permanent") -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": event_id,
        "timestamp": when.timestamp(),
        "log-level": "info",
        "event": kind,
        "recipient": recipient,
        "recipient-domain": recipient.split("@")[1],
        "tags": ["campaign"],
        "user-variables": {MESSAGE_ID_KEY: str(message_id)},
        "message": {"headers": {"to": recipient, "message-id": f"mg-{message_id}@mg.example.com",
                                "from": "notifier@example.com", "subject": "Hi"}, "size": 1200},
    }
    if kind == "failed":
        data.update(severity=severity, reason="bounce" if severity == "permanent" else "generic",
                    **{"delivery-status": {"code": 550, "message": "5.1.1 user unknown"}})
    if kind == "clicked":
        data["url"] = "https://example.com/offer"
    return data


def sns_message_text(ses: dict[str, Any]) -> str:
    return json.dumps(ses)


def sendgrid_dropped(*, message_id: int, recipient: str, when: datetime, event_id: str,
                     reason: str) -> dict[str, Any]:
    """A `dropped` event as SendGrid posts it (django-anymail's recorded ones): a `reason` such as
    "Bounced Address", "Unsubscribed Address", "Spam Reporting Address" or "Invalid", and an
    sg_message_id with no X-Message-Id prefix (the message never got that far)."""
    return {
        "email": recipient,
        "timestamp": int(when.timestamp()),
        "smtp-id": f"<sg-{message_id}@ismtpd-555>",
        "sg_event_id": event_id,
        "sg_message_id": "filter0093p1las1.9128.5717FB8127.0",
        "reason": reason,
        "event": "dropped",
        MESSAGE_ID_KEY: str(message_id),
    }


def mailgun_rejected(*, message_id: int, recipient: str, when: datetime, event_id: str) -> dict[str, Any]:
    """A `rejected` event (Mailgun's Events API sample): no `recipient` field, the reason in
    free text under `reject`, the address only in the To header."""
    return {
        "event": "rejected",
        "id": event_id,
        "timestamp": when.timestamp(),
        "log-level": "warn",
        "flags": {"is-test-mode": False},
        "reject": {"reason": "Sandbox subdomains are for test purposes only.", "description": ""},
        "user-variables": {MESSAGE_ID_KEY: str(message_id)},
        "message": {"headers": {"to": f"Recipient <{recipient}>", "from": "notifier@example.com",
                                "message-id": f"mg-{message_id}@mg.example.com", "subject": "Hi"}},
    }
