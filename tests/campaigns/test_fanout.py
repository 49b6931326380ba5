"""Fan-out in the database: rows written once per eligible contact, restartable, guarded claims."""

from __future__ import annotations

import pytest
from django.db import connection

from audience.models import Contact, Suppression
from campaigns.audience import audience_count
from campaigns.models import Campaign
from campaigns.selectors import campaign_counters
from campaigns.services import lifecycle
from campaigns.services.fanout import campaign_fanout
from delivery.models import EmailMessage
from delivery.services.ledger import messages_claim, messages_queued_read_for_send
from tests import factories
from tests.campaigns.helpers import contacts_create, fanout_marks_replace

pytestmark = pytest.mark.django_db
MS = EmailMessage.Status


@pytest.fixture
def campaign(db, purged_queues) -> Campaign:
    contacts_create(2500)
    Suppression.objects.create(email="user7@example.com", reason="hard_bounce")
    Suppression.objects.create(email="user1500@example.com", reason="complaint")
    Contact.objects.filter(email="user9@example.com").update(subscribed=False)
    definition = {"conditions": [{"attribute": "n", "op": "lt", "value": 2000}]}
    return Campaign.objects.create(
        name="c", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "segment", "definition": definition},
    )


def send_context(message_id: int) -> dict:
    """What the send path renders this (still QUEUED) row with."""
    return messages_queued_read_for_send(message_ids=[message_id])[0].context


def _rows(campaign: Campaign) -> list[str]:
    return list(EmailMessage.objects.filter(campaign=campaign).values_list("recipient", flat=True))


def test_fanout_writes_one_row_per_eligible_contact_and_counts_the_rest(campaign):
    report = campaign_fanout(campaign_id=campaign.pk)
    assert (report.inserted, report.excluded, report.finished) == (1997, 3, True)
    assert report.tasks == 20  # 1997 rows, 100 per normal-priority task, per 1000-row chunk
    rows = _rows(campaign)
    assert len(rows) == len(set(rows)) == 1997
    assert not {"user7@example.com", "user1500@example.com", "user9@example.com"} & set(rows)
    message = EmailMessage.objects.get(campaign=campaign, recipient="user3@example.com")
    # The row carries no copy of the contact's data: the send path reads it (decision 65).
    assert message.context == {}
    assert send_context(message.id) == {"n": 3, "email": "user3@example.com", "name": "User 3",
                                        "timezone": "Europe/Paris", "locale": "en"}
    assert message.idempotency_key == f"c:{campaign.pk}:{message.contact_id}"
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.SENDING and campaign.fanout_done
    counters = campaign_counters(campaign=campaign)
    assert (counters["total"], counters["queued"], counters["suppressed"]) == (2000, 1997, 3)


def test_fanout_records_the_whole_audience_and_makes_it_exact_when_done(campaign):
    assert audience_count(campaign.audience, campaign_id=campaign.pk) == 2000  # 3 of them excluded
    campaign_fanout(campaign_id=campaign.pk)
    campaign.refresh_from_db()
    assert campaign.audience_size == 2000
    # A count taken at the start that the audience then moved away from (contacts deleted
    # meanwhile) is corrected when the fan-out finishes, so progress can still reach 100%.
    stale = Campaign.objects.create(
        name="stale", template_version=campaign.template_version, status=Campaign.Status.QUEUED,
        audience=campaign.audience, audience_size=2600,
    )
    campaign_fanout(campaign_id=stale.pk)
    stale.refresh_from_db()
    assert stale.audience_size == 2000 == campaign_counters(campaign=stale)["total"]


def test_restarted_fanout_completes_without_duplicates(campaign):
    campaign_fanout(campaign_id=campaign.pk)
    # As if the first run died after its first chunk committed, before publishing it: cursor
    # back to chunk 1, and no publish recorded.
    first_chunk_end = Contact.objects.order_by("id").values_list("id", flat=True)[999]
    EmailMessage.objects.filter(campaign=campaign, contact_id__gt=first_chunk_end).delete()
    Campaign.objects.filter(pk=campaign.pk).update(
        fanout_done=False, fanout_cursor=first_chunk_end, excluded_count=2)
    fanout_marks_replace(campaign.pk, {})
    report = campaign_fanout(campaign_id=campaign.pk)
    assert report.finished and report.republished == 998  # first chunk's rows published again
    rows = _rows(campaign)
    assert len(rows) == len(set(rows)) == 1997
    # Running it again from scratch writes nothing new either.
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False, fanout_cursor=0, excluded_count=0)
    assert campaign_fanout(campaign_id=campaign.pk).inserted == 0
    assert len(_rows(campaign)) == 1997


def test_paused_or_cancelled_rows_are_not_claimed_and_cancel_marks_unsent(campaign):
    campaign_fanout(campaign_id=campaign.pk)
    ids = list(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True)[:10])
    assert len(messages_claim(message_ids=ids[:2], token="t1")) == 2
    lifecycle.campaign_pause(campaign_id=campaign.pk)
    # Claimed but not handed over: back to QUEUED; nothing of a paused campaign is claimable.
    assert EmailMessage.objects.filter(id__in=ids[:2], status=MS.QUEUED).count() == 2
    assert messages_claim(message_ids=ids, token="t2") == []
    with pytest.raises(lifecycle.IllegalTransitionError):
        lifecycle.campaign_pause(campaign_id=campaign.pk)
    lifecycle.campaign_resume(campaign_id=campaign.pk)
    assert Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.QUEUED
    assert len(messages_claim(message_ids=ids[:3], token="t3")) == 3
    lifecycle.campaign_cancel(campaign_id=campaign.pk)
    assert messages_claim(message_ids=ids, token="t4") == []
    assert lifecycle.campaign_rows_cancel(campaign_id=campaign.pk) == 1997 - 3
    assert campaign_counters(campaign=campaign)["cancelled"] == 1997
    with pytest.raises(lifecycle.IllegalTransitionError):
        lifecycle.campaign_resume(campaign_id=campaign.pk)


def test_inline_and_list_audiences(db, purged_queues):
    version = factories.template_version()
    inline = Campaign.objects.create(
        name="i", template_version=version, status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "inline", "contacts": [
            {"email": "x@y.io", "name": "X", "data": {"code": "A1"}}, {"email": "z@y.io"}]},
    )
    assert campaign_fanout(campaign_id=inline.pk).inserted == 2
    row = EmailMessage.objects.get(campaign=inline, recipient="x@y.io")
    assert row.context == {"code": "A1"}  # the inline audience's own data; the contact's at send
    assert send_context(row.id)["code"] == "A1" and send_context(row.id)["name"] == "X"
    contacts_create(30, prefix="l")
    from audience.services.contacts import list_members_add

    listed = Campaign.objects.create(
        name="l", template_version=version, status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "list",
                  "list_id": _list_with(list_members_add, 10)},
    )
    assert campaign_fanout(campaign_id=listed.pk).inserted == 10


def _list_with(list_members_add, n: int) -> int:
    from audience.models import ContactList

    contact_list = ContactList.objects.create(client=factories.owner(), name="l")
    ids = list(Contact.objects.filter(email__startswith="l").order_by("id").values_list("id", flat=True)[:n])
    list_members_add(list_id=contact_list.pk, contact_ids=ids)
    return contact_list.pk


def test_schedule_hook_writes_scheduled_rows_with_per_timezone_due_times(db, purged_queues):
    """The hook the scheduling engine fills: a (time zone -> due) map joined in SQL."""
    Contact.objects.create(client=factories.owner(), email="paris@x.io", timezone="Europe/Paris")
    Contact.objects.create(client=factories.owner(), email="tokyo@x.io", timezone="Asia/Tokyo")
    Contact.objects.create(client=factories.owner(), email="nowhere@x.io")
    campaign = Campaign.objects.create(
        name="s", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "segment", "definition": {"conditions": [
            {"field": "subscribed", "op": "equals", "value": True}]}},
        schedule={"type": "due_map", "due": {"Europe/Paris": "2030-01-01T08:00:00+00:00",
                                             "Asia/Tokyo": "2030-01-01T00:00:00+00:00"},
                  "default": "2030-01-01T09:00:00+00:00"},
    )
    report = campaign_fanout(campaign_id=campaign.pk)
    assert (report.inserted, report.tasks) == (0, 0)  # nothing QUEUED, nothing published
    due = {m.recipient: (m.status, m.scheduled_for.isoformat())
           for m in EmailMessage.objects.filter(campaign=campaign)}
    assert due == {"paris@x.io": ("SCHEDULED", "2030-01-01T08:00:00+00:00"),
                   "tokyo@x.io": ("SCHEDULED", "2030-01-01T00:00:00+00:00"),
                   "nowhere@x.io": ("SCHEDULED", "2030-01-01T09:00:00+00:00")}


def test_a_stalled_campaign_is_published_again(campaign, settings):
    """Tasks lost with the broker: QUEUED rows, nothing in flight, no progress -> re-published."""
    from campaigns.services.progress import campaign_stalled_republish
    from core.redis_client import get_redis, redis_key

    get_redis().delete(redis_key("campaigns", "progress", campaign.pk))
    campaign_fanout(campaign_id=campaign.pk)
    settings.NOTIFIER_REQUEUE_AFTER_SECONDS = 0
    assert campaign_stalled_republish(campaign_id=campaign.pk) == 0  # first look: remember progress
    assert campaign_stalled_republish(campaign_id=campaign.pk) == 1997
    messages_claim(message_ids=list(EmailMessage.objects.filter(campaign=campaign).values_list(
        "id", flat=True)[:5]), token="busy")
    assert campaign_stalled_republish(campaign_id=campaign.pk) == 0  # something in flight: not stalled


def test_a_campaign_with_a_batch_in_flight_is_not_counted_row_by_row(campaign):
    """The progress check runs every 2 s for each sending campaign: while a batch is in flight it
    reads one row, never the per-status count over every row of the campaign (decision 68)."""
    from campaigns.services.progress import campaign_stalled_republish

    campaign_fanout(campaign_id=campaign.pk)
    messages_claim(message_ids=list(EmailMessage.objects.filter(campaign=campaign).values_list(
        "id", flat=True)[:5]), token="busy")
    statements: list[str] = []
    def capture(execute, sql, *args):
        statements.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(capture):
        assert campaign_stalled_republish(campaign_id=campaign.pk) == 0
    assert len(statements) == 1 and "LIMIT 1" in statements[0], statements


def test_list_fanout_over_several_chunks_writes_each_member_once(db, purged_queues):
    """2,500 contacts, every other one on the list: three keyset chunks, each member once."""
    from audience.services.contacts import list_members_add

    contacts_create(2500, prefix="k")
    ids = list(Contact.objects.filter(email__startswith="k").order_by("id").values_list("id", flat=True))
    from audience.models import ContactList

    members = ids[::2]
    contact_list = ContactList.objects.create(client=factories.owner(), name="every-other")
    list_members_add(list_id=contact_list.pk, contact_ids=members)
    campaign = Campaign.objects.create(
        name="k", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "list", "list_id": contact_list.pk},
    )
    assert campaign_fanout(campaign_id=campaign.pk).inserted == len(members)
    written = EmailMessage.objects.filter(campaign=campaign).values_list("contact_id", flat=True)
    assert sorted(written) == sorted(members)


def test_list_chunk_reads_the_membership_index_from_the_cursor(db):
    """The chunk bounds the membership scan by the cursor too (PostgreSQL does not carry
    c.id > cursor across the join): without it every chunk read the list from its start."""
    from django.db import connection

    from audience.models import ContactList
    from campaigns.services.fanout import chunk_statement

    contact_list = ContactList.objects.create(client=factories.owner(), name="plan")
    campaign = Campaign.objects.create(
        name="p", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "list", "list_id": contact_list.pk},
    )
    statement = chunk_statement(campaign)
    scan = statement.sql.split("), eligible AS")[0].replace("WITH scan AS (", "")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan TO off")  # tiny test tables: force the index plan
        cursor.execute(f"EXPLAIN {scan}", statement.params(700_000)[: scan.count("%s")])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    membership = [line for line in plan.splitlines() if "Index Cond" in line and "contactlist_id" in line]
    assert membership and all("contact_id >" in line for line in membership), plan


def _marks(campaign: Campaign) -> dict[str, int]:
    from campaigns.services.fanout_marks import fanout_published_marks

    return fanout_published_marks(campaign.pk)


def _died_before_publishing_after(campaign: Campaign, contact_id: int) -> None:
    """As if the run committed every chunk, published those up to `contact_id`, then died."""
    from campaigns.services.fanout_marks import fanout_published_mark

    fanout_published_mark(campaign.pk, None, contact_id)
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False)


def test_a_restarted_fanout_publishes_again_only_what_its_publishing_had_not_reached(campaign):
    campaign_fanout(campaign_id=campaign.pk)
    contacts = list(Contact.objects.order_by("id").values_list("id", flat=True))
    assert _marks(campaign) == {"all": contacts[1999]}  # the last chunk's cursor, once published

    # Redelivered after it finished: everything was published, nothing is published again.
    campaign.refresh_from_db()
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False)
    assert campaign_fanout(campaign_id=campaign.pk).republished == 0

    # Died between the second chunk's commit and its publish: that chunk's rows only.
    _died_before_publishing_after(campaign, contacts[999])
    report = campaign_fanout(campaign_id=campaign.pk)
    second_chunk = EmailMessage.objects.filter(campaign=campaign, contact_id__gt=contacts[999])
    assert report.republished == second_chunk.count() == 999 and report.tasks == 10
    assert report.finished and len(_rows(campaign)) == 1997  # and nothing written twice


def test_a_claimed_row_past_the_mark_is_not_published_again(campaign):
    campaign_fanout(campaign_id=campaign.pk)
    contacts = list(Contact.objects.order_by("id").values_list("id", flat=True))
    late = list(EmailMessage.objects.filter(campaign=campaign, contact_id__gt=contacts[1989])
                .values_list("id", flat=True))
    messages_claim(message_ids=late, token="sent-meanwhile")
    _died_before_publishing_after(campaign, contacts[1979])
    assert campaign_fanout(campaign_id=campaign.pk).republished == 10  # 20 past the mark, 10 claimed


def test_without_marks_or_on_resume_every_unclaimed_row_is_published_again(campaign):
    campaign_fanout(campaign_id=campaign.pk)
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False)
    # A resume: the tasks published before the pause were consumed and skipped.
    assert campaign_fanout(campaign_id=campaign.pk, republish_all=True).republished == 1997
    fanout_marks_replace(campaign.pk, {})  # nothing known: the whole range, as before the marks
    Campaign.objects.filter(pk=campaign.pk).update(fanout_done=False)
    assert campaign_fanout(campaign_id=campaign.pk).republished == 1997


def test_resume_asks_the_fanout_to_publish_every_unclaimed_row_again(
    campaign, django_capture_on_commit_callbacks
):
    from campaigns.tasks import campaign_fanout_task
    from core.priorities import MAINTENANCE_QUEUE
    from notifier.celery import app as celery_app

    campaign_fanout(campaign_id=campaign.pk)
    assert _marks(campaign)  # the marks alone would publish nothing again
    lifecycle.campaign_pause(campaign_id=campaign.pk)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.campaign_resume(campaign_id=campaign.pk)
    with celery_app.connection_for_read() as conn:
        message = conn.SimpleQueue(MAINTENANCE_QUEUE, no_ack=True).get(timeout=10)
    assert message.headers["task"] == "campaigns.fanout"
    args = message.payload[0]
    assert args == [campaign.pk, True]
    assert campaign_fanout_task.run(*args)["tasks"] == 20  # all 1,997 rows, 100 per task


def test_a_fanout_that_loses_redis_is_resumed_later_and_never_fails_its_campaign(campaign, settings):
    """F7 mid-fan-out: Redis restarting is not the campaign's fault (the sweep publishes the
    fan-out again); before, the campaign went FAILED with its rows QUEUED and no task."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from campaigns.tasks import campaign_fanout_task
    from core.redis_client import get_redis
    from notifier.celery import app as celery_app
    from testkit.ports import free_port

    real_url, real_broker = settings.REDIS_URL, celery_app.conf.broker_url
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there: the server restarting
    settings.REDIS_URL = celery_app.conf.broker_url = dead
    get_redis.cache_clear()
    try:
        with pytest.raises(RedisConnectionError):
            campaign_fanout_task.run(campaign.pk)
    finally:
        settings.REDIS_URL, celery_app.conf.broker_url = real_url, real_broker
        get_redis.cache_clear()
    campaign.refresh_from_db()
    assert campaign.status != Campaign.Status.FAILED and not campaign.fanout_done
    # Redis is back: the fan-out runs again from its cursor and completes.
    assert campaign_fanout_task.run(campaign.pk)["tasks"] > 0
    campaign.refresh_from_db()
    assert campaign.fanout_done
