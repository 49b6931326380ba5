"""recount_campaign rebuilds the counters from the unique event marks."""

import pytest
from django.core.management import CommandError, call_command

from feedback.models import CampaignEventCounter
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from tests.feedback.helpers import campaign, event, sent_messages

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
