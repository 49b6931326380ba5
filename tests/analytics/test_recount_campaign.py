"""recount_campaign rebuilds the counters from the unique event marks."""

import pytest
from django.core.management import CommandError, call_command

from feedback.models import CampaignEventCounter
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from tests.feedback.helpers import campaign, event, sent_messages
from tests.plans import statements_of

pytestmark = pytest.mark.django_db


def test_recount_repairs_drifted_counters_and_dry_run_writes_nothing(capsys):
    c = campaign()
    messages = sent_messages(3, campaign_obj=c)
    events_process(events=[event(m, E.OPENED) for m in messages] + [event(messages[0], E.CLICKED)])
    CampaignEventCounter.objects.filter(campaign=c).update(opened=99, clicked=0)
    call_command("recount_campaign", c.id, "--dry-run")
    assert CampaignEventCounter.objects.get(campaign=c).opened == 99
    assert "would be" in capsys.readouterr().out
    call_command("recount_campaign", "--all")
    counter = CampaignEventCounter.objects.get(campaign=c)
    assert (counter.delivered, counter.opened, counter.clicked) == (3, 3, 1)


def test_recount_of_an_unknown_campaign_is_a_clean_error_naming_it():
    known = campaign()
    for flags in ([], ["--dry-run"]):
        with pytest.raises(CommandError, match=r"no campaign with id 424242$"):
            call_command("recount_campaign", known.id, 424242, *flags)
    assert not CampaignEventCounter.objects.exists()  # nothing recounted, not even the known one


def test_the_recount_probes_the_marks_of_its_messages_never_every_mark():
    """Every mark of the retention (~50M at a month of 1M a day) is no join partner: the
    campaign's messages drive one index probe each, whatever the statistics say."""
    from django.db import connection

    from feedback.services.counters import campaign_counters_compute

    c, others = campaign(), campaign()
    mine = sent_messages(3000, campaign_obj=c)  # most of the marks: a hash join's best case
    theirs = sent_messages(500, campaign_obj=others)
    events_process(events=[event(m, E.OPENED) for m in mine + theirs])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE feedback_messageeventmark")
        cursor.execute("ANALYZE delivery_emailmessage")
    found = {}
    (sql, params), = statements_of(lambda: found.update(campaign_counters_compute(campaign_id=c.id)))
    assert found["opened"] == 3000
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    scans = [line for line in plan.splitlines() if "Seq Scan on feedback_messageeventmark" in line
             and "cost=0.00..0.00" not in line]  # next week's empty partition: nothing to read
    assert scans == [] and "Hash Join" not in plan and "Index Scan" in plan, plan
