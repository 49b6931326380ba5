"""Extra headers the sending service adds to each message (never the template author).

Campaign (marketing) mail carries one-click unsubscribe headers, RFC 8058
(https://www.rfc-editor.org/rfc/rfc8058): `List-Unsubscribe` with an HTTPS URI signed per
recipient, and `List-Unsubscribe-Post: List-Unsubscribe=One-Click`, which tells the mailbox
provider to POST that body to the URI. Gmail and Yahoo require both for bulk senders (2024).
Transactional mail gets none. Owned by the campaigns app.
"""

from __future__ import annotations

from delivery.models import EmailMessage


def message_headers(message: EmailMessage) -> dict[str, str]:
    """Headers for one message; empty for transactional mail."""
    if not message.campaign_id or not message.contact_id:
        return {}
    from campaigns.services.unsubscribe import unsubscribe_url

    url = unsubscribe_url(contact_id=message.contact_id, campaign_id=message.campaign_id)
    return {
        "List-Unsubscribe": f"<{url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }
