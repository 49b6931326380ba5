"""The daily facts (issue 30, decision 118): written from the rows as days close, read by the
statistics API and the dashboard, equal to the rows where both exist, kept when the rows, the
campaign or the service are gone."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django_celery_beat.models import PeriodicTask

from analytics.dashboard.selectors import dashboard_data
from analytics.horizon import day_start, metadata_horizon, utc_today
from analytics.models import COUNTERS, DayFact, FactsDay
from analytics.services.facts import facts_days_to_write, facts_write_day
from analytics.tasks import write_facts
from campaigns.models import Campaign
from clients.models import ApiKey, Service
from clients.retention import retention_set
from delivery.models import EmailMessage
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from templates.models import Template, TemplateVersion
from tests import factories
from tests.feedback.helpers import campaign, event, sent_messages

pytestmark = pytest.mark.django_db
TODAY = utc_today()


@pytest.fixture(autouse=True)
def _no_cached_days():
    cache.delete_many([f"dashboard:facts-days:{TODAY.isoformat()}:14"])


def day(ago: int) -> date:
    return TODAY - timedelta(days=ago)


def at(ago: int, hour: float) -> datetime:
    return day_start(day(ago)) + timedelta(hours=hour)


def sent(count: int, when: datetime, **fields) -> list[EmailMessage]:
    """`count` messages sent at `when` (claimed a second before, created a minute before)."""
    rows = sent_messages(count, **fields)
    EmailMessage.objects.filter(pk__in=[m.pk for m in rows]).update(
        sent_at=when, claimed_at=when - timedelta(seconds=1), created_at=when - timedelta(minutes=1))
    return rows


def ended(status: str, *, claimed: datetime | None, created: datetime, **fields) -> EmailMessage:
    row = sent_messages(1, status=status, **fields)[0]
    EmailMessage.objects.filter(pk=row.pk).update(sent_at=None, claimed_at=claimed, created_at=created)
    return row


@pytest.fixture
def history() -> dict:
    """Five closed days and today of the owner's mail, with events on other days than the sends."""
    c = campaign(status=Campaign.Status.COMPLETED)
    Campaign.objects.filter(pk=c.pk).update(created_at=at(4, 9))
    c.refresh_from_db()
    news = sent(6, at(4, 10), campaign_obj=c)  # day 4: six campaign messages
    otp = sent(4, at(3, 23.999))  # day 3, seconds before midnight: delivered on day 2
    events = [event(m, E.DELIVERED, at=at(4, 10.01)) for m in news[:5]]
    events += [event(news[5], E.BOUNCED, at=at(4, 10.02), bounce="hard")]
    events += [event(m, E.OPENED, at=at(3, 9)) for m in news[:2]]  # opened the next day
    events += [event(news[0], E.OPENED, at=at(3, 9.5))]  # a second open: still one opened message
    events += [event(news[0], E.CLICKED, at=at(3, 9.6)), event(news[1], E.COMPLAINED, at=at(3, 12))]
    events += [event(news[2], E.UNSUBSCRIBED, at=at(2, 8))]
    events += [event(m, E.DELIVERED, at=at(2, 0.01)) for m in otp]
    events_process(events=events)
    ended("FAILED", claimed=at(4, 11), created=at(4, 10))
    ended("SUPPRESSED", claimed=None, created=at(3, 15))  # suppressed at the accept
    ended("SUPPRESSED", claimed=at(2, 7), created=at(5, 7))  # withheld at its send
    test = sent(1, at(2, 6))  # a test key's: on the test side only
    EmailMessage.objects.filter(pk=test[0].pk).update(key_type="test")
    today = sent(2, day_start(TODAY))
    events_process(events=[event(m, E.DELIVERED, at=day_start(TODAY) + timedelta(seconds=5)) for m in today])
    return {"campaign": c}


EXPECTED = {  # days ago -> the live side's counters that are not 0
    4: {"sent": 6, "delivered": 5, "bounced": 1, "failed": 1},
    3: {"sent": 4, "opened": 2, "clicked": 1, "complained": 1, "suppressed": 1},
    2: {"delivered": 4, "unsubscribed": 1, "suppressed": 1},
    0: {"sent": 2, "delivered": 2},
}


def days_of(api, query: str) -> dict:
    response = api.get(f"/api/v1/stats/overview?{query}")
    assert response.status_code == 200, response.content
    return response.json()["days"]


def without_source(points: list[dict]) -> list[dict]:
    return [{k: v for k, v in p.items() if k != "source"} for p in points]


def write_closed_days() -> None:
    for ago in range(5, 0, -1):
        facts_write_day(day(ago))


def test_the_api_answers_the_same_from_facts_as_from_rows(api, history, purged_queues):
    query = f"from={day(5)}&to={TODAY}"
    from_rows = days_of(api, query)
    assert from_rows["sources"] == {"facts": 0, "rows": 6, "none": 0}
    for point in from_rows["points"]:
        ago = (TODAY - date.fromisoformat(point["date"])).days
        assert {k: v for k, v in point.items() if k in COUNTERS and v} == EXPECTED.get(ago, {}), point["date"]
    by_template = days_of(api, query + "&by=template")
    by_campaign = days_of(api, query + "&by=campaign")
    series = api.get(f"/api/v1/campaigns/{history['campaign'].id}/stats?interval=day").json()

    write_closed_days()

    from_facts = days_of(api, query)
    assert from_facts["sources"] == {"facts": 5, "rows": 1, "none": 0}
    assert [p["source"] for p in from_facts["points"]] == ["facts"] * 5 + ["rows"]
    assert without_source(from_facts["points"]) == without_source(from_rows["points"])
    assert from_facts["totals"] == from_rows["totals"]
    assert days_of(api, query + "&by=template") == {**by_template, "sources": from_facts["sources"]}
    assert days_of(api, query + "&by=campaign") == {**by_campaign, "sources": from_facts["sources"]}
    campaign_id = history["campaign"].id
    campaign_points = {p["date"]: p for p in by_campaign["points"] if p.get("campaign") == campaign_id}
    assert len(campaign_points) == 3  # days 4, 3 and 2 of the campaign
    after = api.get(f"/api/v1/campaigns/{history['campaign'].id}/stats?interval=day").json()
    assert without_source(after["series"]["points"]) == without_source(series["series"]["points"])
    assert after["counts"] == series["counts"] and after["counts_source"] == "rows"
    # Today so far, written as the periodic run does: every day from the facts, the same figures.
    facts_write_day(TODAY)
    today_too = days_of(api, query)
    assert today_too["sources"] == {"facts": 6, "rows": 0, "none": 0}
    assert without_source(today_too["points"]) == without_source(from_rows["points"])


def test_a_test_key_reads_its_own_side(history, purged_queues):
    from rest_framework.test import APIClient

    from clients.services import api_key_create

    _key, plain = api_key_create(service=factories.owner(), name="ci", key_type="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {plain}")
    write_closed_days()
    answer = days_of(client, f"from={day(5)}&to={day(1)}")
    assert answer["totals"]["sent"] == 1 and sum(answer["totals"].values()) == 1


def test_rewriting_a_day_is_idempotent_and_follows_the_rows(history):
    first = facts_write_day(day(4))
    stored = list(DayFact.objects.filter(day=day(4)).order_by("id").values())
    again = facts_write_day(day(4))
    assert (again.rows, again.deleted) == (first.rows, 0)
    rewritten = DayFact.objects.filter(day=day(4)).order_by("id").values()
    assert [{**r, "written_at": None} for r in rewritten] == [{**r, "written_at": None} for r in stored]
    # A late event (reported after its day was written) counts on its day when it is written again.
    facts_write_day(day(3))
    opened = DayFact.objects.filter(day=day(3), campaign_id=history["campaign"].pk)
    assert opened.get().opened == 2
    third = EmailMessage.objects.filter(campaign=history["campaign"]).order_by("id")[2]
    events_process(events=[event(third, E.OPENED, at=at(3, 20))])
    facts_write_day(day(3))
    assert opened.get().opened == 3
    # A tuple of one FAILED message, sent again on another day: the rows no longer give it.
    lone = ended("FAILED", claimed=at(4, 12), created=at(4, 12), campaign_obj=None)
    other = TemplateVersion.objects.get(pk=lone.template_version_id).template_id
    facts_write_day(day(4))
    assert DayFact.objects.get(day=day(4), template_id=other).failed == 1
    EmailMessage.objects.filter(pk=lone.pk).update(status="SENT", claimed_at=at(1, 1), sent_at=at(1, 1))
    assert facts_write_day(day(4)).deleted == 1
    assert not DayFact.objects.filter(day=day(4), template_id=other).exists()
    # A deleted campaign's messages go with it; its facts stay.
    for ago in (3, 2):
        facts_write_day(day(ago))
    c, campaign_id = history["campaign"], history["campaign"].pk
    facts = DayFact.objects.filter(campaign_id=campaign_id)
    before = sorted(facts.values_list("day", "sent", "delivered", "opened", "unsubscribed"))
    assert before == [(day(4), 6, 5, 0, 0), (day(3), 0, 0, 3, 0), (day(2), 0, 0, 0, 1)]
    c.delete()
    assert not EmailMessage.objects.filter(campaign_id=campaign_id).exists()
    for ago in (4, 3, 2):
        facts_write_day(day(ago))
    assert sorted(facts.values_list("day", "sent", "delivered", "opened", "unsubscribed")) == before


def test_facts_outlive_the_rows_and_the_service(api, history, settings, purged_queues):
    write_closed_days()
    query = f"from={day(5)}&to={day(1)}"
    answer = days_of(api, query)
    service = factories.owner()
    # The rows are gone (the retention): the API answers the same from the facts, and the hourly
    # run leaves the days past the horizon as they are.
    EmailMessage.objects.filter(client=service).delete()
    # (The metadata retention is never below the personal one: decision 120.)
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = settings.NOTIFIER_RETENTION_METADATA_DAYS = 1
    write_facts()
    assert days_of(api, query) == answer
    # The campaign began before the horizon: its counts come from the facts.
    stats = api.get(f"/api/v1/campaigns/{history['campaign'].id}/stats").json()
    assert stats["counts_source"] == "facts"
    assert (stats["counts"]["sent"], stats["counts"]["delivered"], stats["counts"]["messages"]) == (6, 5, 0)
    # Disabled (every key revoked), then deleted: the facts stay, with the service's id.
    ApiKey.objects.filter(service=service).update(revoked=True)
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS, settings.NOTIFIER_RETENTION_METADATA_DAYS = 7, 90
    stored = sorted(DayFact.objects.filter(service_id=service.pk).values_list("day", "template_id", "sent"))
    Campaign.objects.filter(client=service).delete()
    # (Its broadcast suppressions go with it: tests/clients/test_service_delete.py.)
    TemplateVersion.objects.filter(template__client=service).delete()
    Template.objects.filter(client=service).delete()
    Service.objects.filter(pk=service.pk).delete()
    write_closed_days()  # the days are within the retention again, but the service is gone
    kept = DayFact.objects.filter(service_id=service.pk).values_list("day", "template_id", "sent")
    assert sorted(kept) == stored
    days = {p["date"]: p for p in dashboard_data()["days"]["points"]}
    assert days[day(4).isoformat()]["sent"] == 6 and days[day(3).isoformat()]["opened"] == 2


def test_a_services_horizon_is_its_shorter_metadata_retention(db):
    service = factories.owner()
    now = day_start(TODAY)
    assert metadata_horizon(service, now=now) == now - timedelta(days=90)  # the default
    retention_set(service=service, change={"transactional": {"metadata_days": 30}})
    assert metadata_horizon(Service.objects.get(pk=service.pk), now=now) == now - timedelta(days=30)


def test_the_days_to_write_and_the_schedule(settings):
    settings.NOTIFIER_FACTS_REWRITE_DAYS = 3
    now = day_start(TODAY) + timedelta(hours=5)
    first = facts_days_to_write(now=now)
    assert first[:4] == [TODAY, day(1), day(2), day(3)]
    assert first[4:] == [day(n) for n in range(4, 11)]  # a week of days never written, newest first
    for d in first[1:]:
        FactsDay.objects.create(day=d, written_at=now - timedelta(minutes=30))
    # Within the hour: today only, and the next week never written.
    assert facts_days_to_write(now=now) == [TODAY, *[day(n) for n in range(11, 18)]]
    FactsDay.objects.filter(day=day(2)).update(written_at=now - timedelta(hours=1))
    FactsDay.objects.filter(day=day(1)).update(written_at=day_start(TODAY) - timedelta(minutes=1))
    after_midnight = day_start(TODAY) + timedelta(minutes=5)  # yesterday's last write was before it closed
    assert facts_days_to_write(now=after_midnight)[:2] == [TODAY, day(1)]
    assert facts_days_to_write(now=now)[:3] == [TODAY, day(1), day(2)]
    assert PeriodicTask.objects.filter(task="analytics.write_facts", queue="maintenance",
                                       interval__every=600).exists()
    with pytest.raises(ValueError, match="not begun"):
        facts_write_day(TODAY + timedelta(days=1))


def test_the_backfill_command(history, capsys):
    call_command("write_facts", "--day", day(4).isoformat())
    assert f"[1/1] {day(4)}: 2 rows" in capsys.readouterr().out
    call_command("write_facts", "--from", day(5).isoformat(), "--to", day(2).isoformat())
    out = capsys.readouterr().out
    assert out.count("rows,") == 4 and f"[4/4] {day(2)}" in out
    assert set(FactsDay.objects.values_list("day", flat=True)) == {day(n) for n in (2, 3, 4, 5)}
    for args, message in [(["--day", day(-1).isoformat()], "not begun"),
                          (["--day", "2026-13-01"], "not a date"),
                          (["--to", day(2).isoformat()], "needs --from"),
                          (["--from", day(2).isoformat(), "--to", day(3).isoformat()], "after --to")]:
        with pytest.raises(CommandError, match=message):
            call_command("write_facts", *args)


@pytest.mark.parametrize(("query", "field"), [
    ("from=2026-02-30", "from"), ("to=yesterday", "to"), ("by=weekday", "by"),
    (f"from={day(-1)}", "from"), (f"to={day(-1)}", "to"), (f"from={day(1)}&to={day(2)}", "from"),
    (f"from={day(400)}&to={TODAY}", "to"),
])
def test_overview_days_refuse_a_bad_range_naming_the_field(api, query, field):
    response = api.get(f"/api/v1/stats/overview?{query}")
    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["fields"]) == [field]


def test_a_day_last_written_before_it_closed_is_read_from_the_rows(api, history, purged_queues):
    query = f"from={day(4)}&to={day(4)}"
    facts_write_day(day(4), now=at(4, 23))  # the periodic run's last write of the day, then it stopped
    assert days_of(api, query)["sources"] == {"facts": 0, "rows": 1, "none": 0}
    assert days_of(api, query)["points"][0]["sent"] == 6
    facts_write_day(day(4))
    assert days_of(api, query)["sources"] == {"facts": 1, "rows": 0, "none": 0}


def test_days_not_written_are_read_in_runs_of_consecutive_days():
    from analytics.selectors.days import _runs

    assert _runs([day(1), day(9), day(2), TODAY, day(8)]) == [(day(9), day(8)), (day(2), TODAY)]


def test_overview_without_a_range_has_no_days(api, purged_queues):
    body = api.get("/api/v1/stats/overview").json()
    assert "days" not in body and "queues" in body
    assert days_of(api, "by=stream")["from"] == day(29).isoformat()
