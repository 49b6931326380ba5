"""Celery tasks of the analytics app, on the maintenance queue (the ops worker)."""

from __future__ import annotations

from celery import shared_task

from analytics.selectors.overview import live_minutes_keep
from analytics.services.ended_campaigns import ended_campaign_counts_refresh
from analytics.services.facts import facts_write_recent


# Beat, every 10 minutes (migration 0002): today so far each time, yesterday within ten minutes of
# its close, every closed day of the rewrite window again each hour (a late event lands within
# the hour), and a week of never-written days per run.
@shared_task(name="analytics.write_facts", ignore_result=True)
def write_facts() -> list[str]:
    return [f"{w.day}: {w.rows} rows" + (" (skipped: rows gone)" if w.skipped else "")
            for w in facts_write_recent()]


# Beat, every minute (migration 0003): counts the minutes of the live series (sends, webhook events,
# provider calls) that settled since the last run and keeps them (decisions 135 and 138), so the
# first dashboard opened after a quiet hour reads kept minutes instead of counting the hour
# (136-193 ms for 200,000 sends). It counts only the settled minutes not kept yet: usually one
# minute of each. Its answer is the number of minutes kept per series.
@shared_task(name="analytics.keep_throughput_minutes", ignore_result=True)
def keep_throughput_minutes() -> dict[str, int]:
    return live_minutes_keep()


# Beat, every minute (migration 0004): the counts of the campaigns the dashboard shows as ended
# (decision 140), recounted as they come due; its answer is how many campaigns it counted.
@shared_task(name="analytics.count_ended_campaigns", ignore_result=True)
def count_ended_campaigns() -> int:
    return ended_campaign_counts_refresh()
