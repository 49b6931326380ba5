"""Normalisation of realistic (documented-shape) payloads from each provider."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from delivery.providers.mailgun.webhook import normalize_mailgun
from delivery.providers.sendgrid.webhook import normalize_sendgrid
from delivery.providers.ses.sns import SnsVerifier
from delivery.providers.ses.webhook import normalize_ses
from feedback.normalize import EventType, NormalizationError, normalize
from testkit.webhook_signing import TEST_TOPIC_ARN, SnsTestSigner

OUR_ID = "0b9c6b3e-4a4e-4c8e-9d7e-2f1f5a1c9e11"

# ------------------------------------------------------------------------------ SES
# Shapes follow "Examples of event data that Amazon SES publishes to Amazon SNS".

SES_MAIL: dict[str, Any] = {
    "timestamp": "2017-08-05T00:40:02.012Z",
    "source": "Sender Name <sender@example.com>",
    "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/sender@example.com",
    "sendingAccountId": "123456789012",
    "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
    "destination": ["recipient@example.com", "second@example.com"],
    "headersTruncated": False,
    "headers": [{"name": "From", "value": "Sender Name <sender@example.com>"}],
    "commonHeaders": {"from": ["Sender Name <sender@example.com>"], "subject": "Hello"},
    "tags": {
        "ses:configuration-set": ["ConfigSet"],
        "ses:source-ip": ["192.0.2.0"],
        "notifier_message_id": [OUR_ID],
    },
}

SES_PERMANENT_BOUNCE = {
    "eventType": "Bounce",
    "bounce": {
        "bounceType": "Permanent",
        "bounceSubType": "General",
        "bouncedRecipients": [
            {
                "emailAddress": "recipient@example.com",
                "action": "failed",
                "status": "5.1.1",
                "diagnosticCode": "smtp; 550 5.1.1 user unknown",
            }
        ],
        "timestamp": "2017-08-05T00:41:02.669Z",
        "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
        "reportingMTA": "dsn; mta.example.com",
    },
    "mail": SES_MAIL,
}

# Older "notification" format (notificationType, no tags) for a transient bounce.
SES_TRANSIENT_BOUNCE = {
    "notificationType": "Bounce",
    "bounce": {
        "bounceType": "Transient",
        "bounceSubType": "MailboxFull",
        "bouncedRecipients": [
            {"emailAddress": "second@example.com", "status": "4.2.2",
             "action": "failed", "diagnosticCode": "smtp; 452 4.2.2 mailbox full"}
        ],
        "timestamp": "2017-08-05T00:45:00.000Z",
        "feedbackId": "0100015e-transient",
    },
    "mail": {k: v for k, v in SES_MAIL.items() if k != "tags"},
}

SES_COMPLAINT = {
    "eventType": "Complaint",
    "complaint": {
        "feedbackId": "0100015e-complaint",
        "complaintSubType": None,
        "complainedRecipients": [{"emailAddress": "recipient@example.com"}],
        "timestamp": "2017-08-05T00:41:02.669Z",
        "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
        "complaintFeedbackType": "abuse",
        "arrivalDate": "2017-08-05T00:41:02.669Z",
    },
    "mail": SES_MAIL,
}

SES_DELIVERY = {
    "eventType": "Delivery",
    "delivery": {
        "timestamp": "2017-08-05T00:41:02.669Z",
        "processingTimeMillis": 546,
        "recipients": ["recipient@example.com"],
        "smtpResponse": "250 2.6.0 Message received",
        "reportingMTA": "a8-70.smtp-out.amazonses.com",
    },
    "mail": SES_MAIL,
}

SES_OPEN = {
    "eventType": "Open",
    "open": {
        "ipAddress": "192.0.2.1",
        "timestamp": "2017-08-09T22:00:19.652Z",
        "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 10_3_3 like Mac OS X)",
    },
    "mail": SES_MAIL,
}

SES_CLICK = {
    "eventType": "Click",
    "click": {
        "ipAddress": "192.0.2.1",
        "link": "https://docs.aws.amazon.com/ses/latest/DeveloperGuide/send-email-smtp.html",
        "linkTags": {"samplekey0": ["samplevalue0"]},
        "timestamp": "2017-08-09T23:51:25.570Z",
        "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
    },
    "mail": SES_MAIL,
}

SES_DELIVERY_DELAY = {
    "eventType": "DeliveryDelay",
    "deliveryDelay": {
        "timestamp": "2020-06-16T00:15:40.641Z",
        "delayType": "TransientCommunicationFailure",
        "expirationTime": "2020-06-16T00:25:40.914Z",
        "delayedRecipients": [
            {"emailAddress": "recipient@example.com", "status": "4.4.1",
             "diagnosticCode": "smtp; 421 4.4.1 Unable to connect to remote host"}
        ],
    },
    "mail": SES_MAIL,
}


def sns_envelope(ses_event: dict[str, Any] | str, message_id: str = "sns-1") -> dict[str, Any]:
    return {
        "Type": "Notification",
        "MessageId": message_id,
        "TopicArn": TEST_TOPIC_ARN,
        "Message": ses_event if isinstance(ses_event, str) else json.dumps(ses_event),
        "Timestamp": "2017-08-05T00:41:03.000Z",
    }


def test_ses_permanent_bounce() -> None:
    [event] = normalize_ses(sns_envelope(SES_PERMANENT_BOUNCE))
    assert event.provider == "ses"
    assert event.event_type is EventType.BOUNCED
    assert event.bounce_type == "hard"
    assert event.recipient == "recipient@example.com"  # only the bounced recipient
    assert event.occurred_at == datetime(2017, 8, 5, 0, 41, 2, 669000, tzinfo=UTC)
    assert event.provider_message_id == SES_MAIL["messageId"]
    assert event.notifier_message_id == OUR_ID
    assert event.provider_event_id == "sns-1:recipient@example.com"
    assert event.raw["bounce"]["bounceSubType"] == "General"


def test_ses_transient_bounce_notification_format() -> None:
    [event] = normalize_ses(sns_envelope(SES_TRANSIENT_BOUNCE))
    assert (event.event_type, event.bounce_type) == (EventType.BOUNCED, "soft")
    assert event.recipient == "second@example.com"
    assert event.notifier_message_id is None  # notification format carries no tags


def test_ses_undetermined_bounce_is_soft() -> None:
    payload = copy.deepcopy(SES_PERMANENT_BOUNCE)
    payload["bounce"]["bounceType"] = "Undetermined"
    [event] = normalize_ses(sns_envelope(payload))
    assert event.bounce_type == "soft"


def test_ses_complaint() -> None:
    [event] = normalize_ses(sns_envelope(SES_COMPLAINT))
    assert event.event_type is EventType.COMPLAINED
    assert event.recipient == "recipient@example.com"
    assert event.bounce_type is None


def test_ses_delivery_and_delay() -> None:
    [delivered] = normalize_ses(sns_envelope(SES_DELIVERY))
    assert delivered.event_type is EventType.DELIVERED
    [delayed] = normalize_ses(sns_envelope(SES_DELIVERY_DELAY))
    assert delayed.event_type is EventType.DEFERRED


def test_ses_open_fans_out_to_all_destinations() -> None:
    events = normalize_ses(sns_envelope(SES_OPEN, message_id="sns-open"))
    assert [e.event_type for e in events] == [EventType.OPENED, EventType.OPENED]
    assert [e.recipient for e in events] == SES_MAIL["destination"]
    assert len({e.provider_event_id for e in events}) == 2
    assert events[0].occurred_at == datetime(2017, 8, 9, 22, 0, 19, 652000, tzinfo=UTC)


def test_ses_click() -> None:
    event = normalize_ses(sns_envelope(SES_CLICK))[0]
    assert event.event_type is EventType.CLICKED
    assert event.url == SES_CLICK["click"]["link"]


def test_ses_send_reject_and_unsubscribe() -> None:
    [send, _] = normalize_ses(sns_envelope({"eventType": "Send", "send": {}, "mail": SES_MAIL}))
    assert send.event_type is EventType.SENT
    assert send.occurred_at == datetime(2017, 8, 5, 0, 40, 2, 12000, tzinfo=UTC)  # mail time
    reject = {"eventType": "Reject", "reject": {"reason": "Bad content"}, "mail": SES_MAIL}
    assert normalize_ses(sns_envelope(reject))[0].event_type is EventType.DROPPED
    unsub = {
        "eventType": "Subscription",
        "subscription": {
            "contactList": "SystemMonitor-Canary",
            "timestamp": "2022-01-12T01:00:17.910Z",
            "source": "UnsubscribeHeader",
            "newTopicPreferences": {"unsubscribeAll": True, "topicSubscriptionStatus": []},
            "oldTopicPreferences": {"unsubscribeAll": False},
        },
        "mail": SES_MAIL,
    }
    assert normalize_ses(sns_envelope(unsub))[0].event_type is EventType.UNSUBSCRIBED
    unsub["subscription"]["newTopicPreferences"] = {"unsubscribeAll": False}
    assert normalize_ses(sns_envelope(unsub)) == []  # a preference change, not an opt-out


def test_ses_non_events() -> None:
    validation = "Successfully validated SNS topic for Amazon SES event publishing."
    assert normalize_ses(sns_envelope(validation)) == []
    assert normalize_ses({**sns_envelope("x"), "Type": "SubscriptionConfirmation"}) == []
    assert normalize_ses(sns_envelope({"eventType": "SomethingNew", "mail": SES_MAIL})) == []
    with pytest.raises(NormalizationError):
        normalize_ses(sns_envelope("not json"))


@pytest.mark.parametrize("version", ["1", "2"])
def test_ses_end_to_end_signed_then_normalized(version: str) -> None:
    signer = SnsTestSigner.generate()
    verifier = SnsVerifier(
        allowed_topic_arns=[TEST_TOPIC_ARN], certificate_store=signer.certificate_store()
    )
    message = signer.notification(SES_PERMANENT_BOUNCE, message_id="sns-e2e", version=version)
    [event] = normalize("ses", verifier.verify(json.dumps(message)))
    assert (event.event_type, event.bounce_type) == (EventType.BOUNCED, "hard")
    assert event.provider_event_id == "sns-e2e:recipient@example.com"


# ------------------------------------------------------------------------------ SendGrid
# Shapes follow the SendGrid "Event Webhook Reference" example batch.


def sg_event(event: str, **extra: Any) -> dict[str, Any]:
    return {
        "email": "example@test.com",
        "timestamp": 1513299569,
        "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>",
        "event": event,
        "category": ["cat facts"],
        "sg_event_id": f"sg-{event}-{extra.get('type', '')}",
        "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
        "notifier_message_id": OUR_ID,
        **extra,
    }


SENDGRID_BATCH = [
    sg_event("processed"),
    sg_event("deferred", response="400 try again later", attempt="5"),
    sg_event("delivered", response="250 OK"),
    sg_event("open", useragent="Mozilla/4.0", ip="255.255.255.255", sg_machine_open=False),
    sg_event("click", useragent="Mozilla/4.0", ip="255.255.255.255",
             url="http://www.sendgrid.com/", url_offset={"index": 0, "type": "html"}),
    sg_event("bounce", reason="500 unknown recipient", status="5.0.0", type="bounce",
             bounce_classification="Invalid Address"),
    sg_event("bounce", reason="550 blocked by policy", status="5.7.1", type="blocked",
             bounce_classification="Reputation"),
    sg_event("dropped", reason="Bounced Address", status="5.0.0"),
    sg_event("spamreport"),
    sg_event("unsubscribe"),
    sg_event("group_unsubscribe", asm_group_id=10),
    sg_event("group_resubscribe", asm_group_id=10),
]


def test_sendgrid_batch() -> None:
    events = normalize_sendgrid(SENDGRID_BATCH)
    assert [(e.event_type, e.bounce_type) for e in events] == [
        (EventType.SENT, None),
        (EventType.DEFERRED, None),
        (EventType.DELIVERED, None),
        (EventType.OPENED, None),
        (EventType.CLICKED, None),
        (EventType.BOUNCED, "hard"),
        (EventType.BOUNCED, "soft"),
        (EventType.DROPPED, None),
        (EventType.COMPLAINED, None),
        (EventType.UNSUBSCRIBED, None),
        (EventType.UNSUBSCRIBED, None),
    ]  # group_resubscribe is not tracked
    assert [e.drop_reason for e in events if e.event_type is EventType.DROPPED] == ["bounce"]
    click = events[4]
    assert click.url == "http://www.sendgrid.com/"
    assert click.recipient == "example@test.com"
    assert click.provider_message_id == "14c5d75ce93.dfd.64b469"
    assert click.notifier_message_id == OUR_ID
    assert click.provider_event_id == "sg-click-"
    assert click.occurred_at == datetime.fromtimestamp(1513299569, UTC)


def test_sendgrid_missing_event_id_is_an_error() -> None:
    broken = sg_event("delivered")
    del broken["sg_event_id"]
    with pytest.raises(NormalizationError):
        normalize_sendgrid([broken])


# ------------------------------------------------------------------------------ Mailgun
# Shapes follow Mailgun's webhook "event-data" samples.


def mg_payload(event: str, **extra: Any) -> dict[str, Any]:
    return {
        "signature": {"timestamp": "1529006854", "token": "a8ce0edb2dd8", "signature": "x"},
        "event-data": {
            "id": f"CPgfbmQMTCKtHW6uIWtuVe-{event}",
            "timestamp": 1521472262.908181,
            "log-level": "info",
            "event": event,
            "recipient": "alice@example.com",
            "recipient-domain": "example.com",
            "tags": ["my_tag_1"],
            "user-variables": {"notifier_message_id": OUR_ID},
            "message": {
                "headers": {
                    "to": "Alice <alice@example.com>",
                    "message-id": "20130503182626.18666.16540@example.com",
                    "from": "Bob <bob@example.com>",
                    "subject": "Test",
                },
                "size": 111,
            },
            **extra,
        },
    }


def test_mailgun_delivered() -> None:
    [event] = normalize_mailgun(mg_payload("delivered", **{"delivery-status": {"code": 250}}))
    assert event.provider == "mailgun"
    assert event.event_type is EventType.DELIVERED
    assert event.recipient == "alice@example.com"
    assert event.provider_message_id == "20130503182626.18666.16540@example.com"
    assert event.notifier_message_id == OUR_ID
    assert event.provider_event_id == "CPgfbmQMTCKtHW6uIWtuVe-delivered"
    assert event.occurred_at == datetime.fromtimestamp(1521472262.908181, UTC)


def test_mailgun_permanent_failure_is_hard_bounce() -> None:
    payload = mg_payload("failed", severity="permanent", reason="bounce",
                         **{"delivery-status": {"code": 550, "message": "No such user"}})
    [event] = normalize_mailgun(payload)
    assert (event.event_type, event.bounce_type) == (EventType.BOUNCED, "hard")


def test_mailgun_temporary_failure_is_deferred() -> None:
    [event] = normalize_mailgun(mg_payload("failed", severity="temporary", reason="generic"))
    assert (event.event_type, event.bounce_type) == (EventType.DEFERRED, None)


def test_mailgun_exhausted_retries_is_soft_bounce() -> None:
    [event] = normalize_mailgun(mg_payload("failed", severity="permanent", reason="old"))
    assert (event.event_type, event.bounce_type) == (EventType.BOUNCED, "soft")


def test_mailgun_suppressed_is_dropped() -> None:
    payload = mg_payload("failed", severity="permanent", reason="suppress-bounce")
    [event] = normalize_mailgun(payload)
    assert (event.event_type, event.drop_reason) == (EventType.DROPPED, "bounce")


def test_mailgun_engagement_and_complaint() -> None:
    [opened] = normalize_mailgun(mg_payload("opened"))
    assert opened.event_type is EventType.OPENED
    [clicked] = normalize_mailgun(mg_payload("clicked", url="https://example.com/x?y=1"))
    assert (clicked.event_type, clicked.url) == (EventType.CLICKED, "https://example.com/x?y=1")
    assert normalize_mailgun(mg_payload("complained"))[0].event_type is EventType.COMPLAINED
    assert normalize_mailgun(mg_payload("unsubscribed"))[0].event_type is EventType.UNSUBSCRIBED
    assert normalize_mailgun(mg_payload("stored")) == []


def test_mailgun_rejected_without_recipient_uses_to_header() -> None:
    payload = mg_payload("rejected", reject={"reason": "Sandbox subdomains are for test"})
    del payload["event-data"]["recipient"]
    [event] = normalize("mailgun", payload)
    assert (event.event_type, event.recipient) == (EventType.DROPPED, "alice@example.com")
    assert event.drop_reason is None  # free-text reason: no suppression list named


def test_unknown_provider() -> None:
    with pytest.raises(NormalizationError):
        normalize("postmark", {})  # type: ignore[arg-type]
