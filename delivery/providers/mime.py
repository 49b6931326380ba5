"""Build MIME bytes fast.

The compat32 MIME classes cost ~0.7 ms per message against ~2.7 ms for the stdlib
`EmailMessage` API (measured in the design notes), and at thousands of messages per second
that difference is the pipeline's ceiling.
"""

from __future__ import annotations

import uuid
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.utils import formatdate

from delivery.providers.base import OutgoingEmail

MESSAGE_ID_HEADER = "X-Notifier-Message-Id"


def new_message_id_header(message_id: int, from_email: str) -> str:
    domain = from_email.rpartition("@")[2] or "notifier.local"
    return f"<{message_id}.{uuid.uuid4().hex}@{domain}>"


def build_mime(email: OutgoingEmail, message_id_header: str) -> bytes:
    """multipart/alternative with text then HTML, as RFC 2046 orders preference."""
    root = MIMEMultipart("alternative")
    root["Subject"] = email.subject
    root["From"] = email.from_email
    root["To"] = email.recipient
    root["Date"] = formatdate(localtime=False)
    root["Message-ID"] = message_id_header
    root[MESSAGE_ID_HEADER] = str(email.message_id)
    for name, value in email.headers.items():
        root[name] = value
    root.attach(MIMEText(email.text, "plain", "utf-8"))
    root.attach(MIMEText(email.html, "html", "utf-8"))
    return root.as_bytes()
