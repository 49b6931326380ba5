"""core/db_outage.py against real PostgreSQL: connections killed with pg_terminate_backend (what
a failover or a proxy restart does to a process), statements that are merely wrong, and the
fan-out task, which must not fail its campaign because the database went away."""

from __future__ import annotations

import psycopg2
import pytest
from django.db import DatabaseError, IntegrityError, ProgrammingError, connection, transaction

from campaigns.models import Campaign
from campaigns.tasks import campaign_fanout_task
from core.db_outage import DATABASE_ERRORS, database_unavailable, hold_through_outage, outage_backoff_seconds
from delivery.models import EmailMessage
from testkit.processes import database_url
from tests import factories
from tests.campaigns.helpers import contacts_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_connection_after():
    """The test leaves a connection it killed: the database flush after it needs a new one."""
    yield
    connection.close()


def _kill_django_connection() -> None:
    """Terminate this thread's Django connection from another session, as a failover does."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = psycopg2.connect(database_url())
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        other.commit()
    finally:
        other.close()


def _error_of(statement: str) -> Exception:
    with pytest.raises(DATABASE_ERRORS) as caught, connection.cursor() as cursor:
        cursor.execute(statement)
    return caught.value


def test_a_killed_connection_is_an_outage_and_so_is_the_broken_one_after_it():
    _kill_django_connection()
    first = _error_of("SELECT 1")
    assert database_unavailable(first), repr(first)
    again = _error_of("SELECT 1")  # Django does not reconnect on its own inside a unit of work
    assert database_unavailable(again), repr(again)


def test_a_wrong_statement_is_not_an_outage():
    assert not database_unavailable(_error_of("SELECT * FROM no_such_table"))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 10")
        with pytest.raises(DatabaseError) as timeout:
            cursor.execute("SELECT pg_sleep(1)")
    assert timeout.value.__cause__.pgcode == "57014" and not database_unavailable(timeout.value)
    with pytest.raises(IntegrityError) as duplicate, connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE once (id int PRIMARY KEY); INSERT INTO once VALUES (1), (1)")
    assert not database_unavailable(duplicate.value)
    assert not database_unavailable(ValueError("not a database error"))


def test_a_held_write_runs_again_on_a_new_connection_and_writes_once(settings):
    settings.NOTIFIER_DB_OUTAGE_HOLD_SECONDS = 10
    version = factories.template_version()
    calls = []

    def write() -> int:
        calls.append(1)
        if len(calls) == 1:
            _kill_django_connection()  # the first try meets the outage
        return factories.email_message(version=version).id

    message_id = hold_through_outage(write, what="a test write")
    assert len(calls) == 2
    assert list(EmailMessage.objects.values_list("id", flat=True)) == [message_id]


def test_a_held_write_gives_up_after_the_hold_and_never_holds_a_wrong_statement(settings):
    settings.NOTIFIER_DB_OUTAGE_HOLD_SECONDS = 0.3
    tries = []

    def always_killed() -> None:
        tries.append(1)
        _kill_django_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    with pytest.raises(DATABASE_ERRORS) as outage:
        hold_through_outage(always_killed, what="a write during a long outage")
    assert database_unavailable(outage.value) and len(tries) >= 2
    connection.close()  # the database is back
    wrong = []

    def bad_sql() -> None:
        wrong.append(1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    with pytest.raises(ProgrammingError):
        hold_through_outage(bad_sql, what="a wrong statement")
    assert wrong == [1]


def test_backoff_starts_quick_and_is_capped():
    assert 0.1 <= outage_backoff_seconds(0) <= 0.25
    assert all(2.5 <= outage_backoff_seconds(n) <= 5.0 for n in (5, 50, 5000))


def test_an_outage_during_the_fanout_does_not_fail_the_campaign(purged_queues):
    contacts_create(20)
    campaign = Campaign.objects.create(
        name="c", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "segment",
                  "definition": {"conditions": [{"attribute": "n", "op": "lt", "value": 100}]}},
    )
    _kill_django_connection()
    # Run as the worker runs it (not eagerly): the outage reaches the task class, which
    # publishes the task again; the campaign is left as it was, not FAILED.
    with pytest.raises(DATABASE_ERRORS) as raised:
        campaign_fanout_task.run(campaign.pk)
    assert database_unavailable(raised.value)
    connection.close()
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.QUEUED
    campaign_fanout_task.run(campaign.pk)  # the retry, once the database is back
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.SENDING and campaign.fanout_done
