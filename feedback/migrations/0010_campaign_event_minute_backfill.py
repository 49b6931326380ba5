"""Fill the campaigns' minute tally (0009, decision 125) from the events and marks already stored.

One campaign per statement and per transaction (`campaign_tally_rebuild`): its messages through
the campaign index drive probes of the (message_id, event_type) index of events and of marks,
instead of one hash join of every message with every event and mark. Not atomic: each campaign
commits on its own, so an interrupted run keeps what it did and a rerun rebuilds every campaign
again (delete + insert, nothing counted twice).

The race: workers of the previous release keep storing events while this runs and do not write
the tally, so an event they store for a campaign after that campaign was filled is missing from
it (the series and the per-provider counts show less than the counters). Run
`manage.py recount_campaign ID` (or `--all`) once they are stopped: it rebuilds the tally from the
rows. Workers of this release take the campaign's counts lock, which the rebuild holds: their
batches are counted once.
"""

from django.db import migrations


def backfill(apps, schema_editor) -> None:
    from feedback.services.tally import campaign_ids_with_messages, campaign_tally_rebuild

    campaign_ids = campaign_ids_with_messages()
    rows = 0
    for position, campaign_id in enumerate(campaign_ids, 1):
        rows += campaign_tally_rebuild(campaign_id)
        if position % 100 == 0:
            print(f"\n  campaign tally: {position}/{len(campaign_ids)} campaigns, {rows} rows", end="")
    if campaign_ids:
        print(f"\n  campaign tally: {len(campaign_ids)} campaigns, {rows} rows", end="")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("feedback", "0009_campaign_event_minute"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
