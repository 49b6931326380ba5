"""Celery tasks of the analytics app, on the maintenance queue (the ops worker)."""

from __future__ import annotations

from celery import shared_task

from analytics.services.facts import facts_write_recent


# Beat, every 10 minutes (migration 0002): today so far each time, yesterday within ten minutes of
# its close, every closed day of the rewrite window again each hour (a late event lands within
# the hour), and a week of never-written days per run.
@shared_task(name="analytics.write_facts", ignore_result=True)
def write_facts() -> list[str]:
    return [f"{w.day}: {w.rows} rows" + (" (skipped: rows gone)" if w.skipped else "")
            for w in facts_write_recent()]
