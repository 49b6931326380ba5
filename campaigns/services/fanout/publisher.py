"""Publishing a range's committed chunks as batch tasks, from a background thread while the next
chunk is written, with a publish mark after each (campaigns/services/fanout_marks.py)."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from campaigns.models import Campaign
from campaigns.services.fanout.report import FanoutReport
from campaigns.services.fanout_marks import fanout_published_mark
from delivery.services.dispatch import messages_enqueue


class Publisher:
    """Publishes one range's committed chunks, in order, from one background thread while the
    next chunk is written, and marks how far it got after each (fanout_marks).

    Publishing (~2 ms per task to Redis) and the INSERT (PostgreSQL's time; psycopg2 releases
    the GIL) then overlap. At most `MAX_PENDING` chunks wait; leaving the block waits for all and
    re-raises a publish failure (the campaign's rows stay QUEUED; a re-run re-publishes them).
    """

    MAX_PENDING = 20

    def __init__(self, campaign: Campaign, range_index: int | None, report: FanoutReport):
        self.campaign_id = campaign.id
        self.priority = campaign.priority
        self.range_index = range_index
        self.report = report
        self.failed = False
        self.pending: deque[Future] = deque()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fanout-publish")

    def __enter__(self) -> Publisher:
        return self

    def publish(self, ids: list[int], through_contact_id: int) -> None:
        """Publish a committed chunk's QUEUED ids; its range is written up to `through_contact_id`."""
        if len(self.pending) >= self.MAX_PENDING:
            self.report.tasks += self.pending.popleft().result()
        self.pending.append(self.executor.submit(self._publish_and_mark, ids, through_contact_id))

    def _publish_and_mark(self, ids: list[int], through_contact_id: int) -> int:
        try:
            tasks = messages_enqueue(message_ids=ids, priority=self.priority)
        except BaseException:
            self.failed = True  # a later chunk's mark would pass over this one's rows
            raise
        if not self.failed:
            fanout_published_mark(self.campaign_id, self.range_index, through_contact_id)
        return tasks

    def __exit__(self, *exc_info: object) -> None:
        try:
            while self.pending:
                self.report.tasks += self.pending.popleft().result()
        finally:
            self.executor.shutdown(wait=True)
