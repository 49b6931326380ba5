"""Decision 58's migrations on populated tables: the message table's client constraint goes
(delivery 0008) and campaigns get their fan-out ranges (campaigns 0007), both ways; then
decision 63's: the campaign constraint goes too (delivery 0009)."""

from __future__ import annotations

import pytest
from django.db import connection

from delivery.models import EmailMessage
from tests.support.migrations import latest_migrations, migrate_to, old_template_version

# With templates and clients as they were before services (issue 27): rows are written the old way.
BEFORE_SERVICES = [("templates", "0003_template_owner"), ("clients", "0003_idempotency_record")]
BEFORE = [("campaigns", "0006_audience_snapshot_owner"), ("delivery", "0007_contact_in_audience"),
          *BEFORE_SERVICES]
AFTER_58 = [("campaigns", "0007_campaign_fanout_ranges"),
            ("delivery", "0008_message_client_no_db_constraint"), *BEFORE_SERVICES]


def _foreign_keys(table: str) -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {c["columns"][0] for c in constraints.values() if c["foreign_key"]}


@pytest.mark.django_db(transaction=True)
def test_the_client_constraint_goes_and_ranges_arrive_with_rows_in_place():
    old = migrate_to(BEFORE)
    version = old_template_version(old)
    campaign = old.get_model("campaigns", "Campaign").objects.create(
        name="before", template_version_id=version.pk, status="SENDING", fanout_cursor=42)
    message = old.get_model("delivery", "EmailMessage").objects.create(
        campaign_id=campaign.pk, client_id=version.template.client_id, recipient="kept@example.com",
        template_version_id=version.pk, idempotency_key="kept")
    assert "client_id" in _foreign_keys(EmailMessage._meta.db_table)

    latest = migrate_to(AFTER_58)

    assert _foreign_keys(EmailMessage._meta.db_table) == {"campaign_id"}
    moved = latest.get_model("campaigns", "Campaign").objects.get(pk=campaign.pk)
    assert (moved.fanout_cursor, moved.fanout_ranges) == (42, [])  # resumes on one connection
    kept = latest.get_model("delivery", "EmailMessage").objects.get(pk=message.pk)
    assert kept.client_id == message.client_id

    migrate_to(BEFORE)  # back again: the constraint is validated against the rows in place
    assert "client_id" in _foreign_keys(EmailMessage._meta.db_table)
    migrate_to(latest_migrations())


@pytest.mark.django_db(transaction=True)
def test_the_campaign_constraint_goes_with_rows_in_place_and_comes_back():
    old = migrate_to(AFTER_58)
    version = old_template_version(old)
    campaign = old.get_model("campaigns", "Campaign").objects.create(
        name="before", template_version_id=version.pk, status="SENDING")
    message = old.get_model("delivery", "EmailMessage").objects.create(
        campaign_id=campaign.pk, recipient="kept@example.com", template_version_id=version.pk,
        idempotency_key="kept")

    latest = migrate_to(latest_migrations())

    assert _foreign_keys(EmailMessage._meta.db_table) == set()
    assert latest.get_model("delivery", "EmailMessage").objects.get(pk=message.pk).campaign_id == campaign.pk
    migrate_to(AFTER_58)  # back again: the constraint is validated against the rows in place
    assert _foreign_keys(EmailMessage._meta.db_table) == {"campaign_id"}
    migrate_to(latest_migrations())
