"""Extra headers the sending service adds to each message (never the template author).

Campaign mail gets List-Unsubscribe headers here (RFC 8058) once the campaign app provides them.
"""

from __future__ import annotations

from delivery.models import EmailMessage


def message_headers(message: EmailMessage) -> dict[str, str]:
    """Headers for one message; empty for transactional mail."""
    return {}
