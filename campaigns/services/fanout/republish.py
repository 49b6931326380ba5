"""Publishing a campaign's QUEUED, unclaimed rows again (a fan-out that continues, a resume, the
progress check's stall and broker-loss sweeps), page by page in the order of an index."""

from __future__ import annotations

from campaigns.models import Campaign
from campaigns.services.fanout.ranges import unpublished_windows
from delivery.services.dispatch import messages_enqueue
from delivery.services.ledger import campaign_queued_page

REPUBLISH_CHUNK = 5000


def campaign_unclaimed_republish(
    *, campaign: Campaign, published: dict[str, int] | None = None
) -> tuple[int, int]:
    """Publish again the campaign's QUEUED, unclaimed rows: (rows, tasks). Every one, or with
    `published` (a fan-out's marks: range field -> contact id) only each range's rows past its mark."""
    if not published:
        return _republish_pages(campaign, "id", after=0, upper=None)
    rows = tasks = 0
    for after, upper in unpublished_windows(campaign, published):
        window_rows, window_tasks = _republish_pages(campaign, "contact_id", after=after, upper=upper)
        rows, tasks = rows + window_rows, tasks + window_tasks
    return rows, tasks


def _republish_pages(campaign: Campaign, order: str, *, after: int, upper: int | None) -> tuple[int, int]:
    rows = tasks = 0
    while True:
        page = campaign_queued_page(campaign_id=campaign.id, order=order, after=after, upper=upper,
                                    limit=REPUBLISH_CHUNK)
        if not page:
            return rows, tasks
        rows += len(page)
        tasks += messages_enqueue(message_ids=[pk for pk, _ in page], priority=campaign.priority)
        after = page[-1][1]
