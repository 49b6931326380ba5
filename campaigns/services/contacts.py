"""What a contact's deletion does to a campaign's rows."""

from __future__ import annotations

from audience.models import Contact
from delivery.models import EmailMessage
from delivery.services import ledger

MS = EmailMessage.Status


def contact_deleted_rows_suppress(sender: object, instance: Contact, **_: object) -> None:
    """pre_delete of a contact: its unsent campaign rows are SUPPRESSED before the delete sets
    their contact to NULL. Campaign rows carry no copy of the contact's data any more (decision
    65), and a deleted contact is not mailed. A row deleted past this (raw SQL) keeps a dangling
    contact id, which the send path suppresses too; only a row a worker claimed in the instant
    before renders with what it carries. Connected in campaigns/apps.py."""
    ledger.contact_campaign_messages_suppress(
        contact_id=instance.pk, error=ledger.CONTACT_GONE_ERROR, statuses=(MS.QUEUED, MS.SCHEDULED)
    )
