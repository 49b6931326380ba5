"""Best open hour from recorded opens (one SQL aggregate), with the 10:00 local fallback."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from audience.models import Contact
from feedback.models import EmailEvent
from scheduling import selectors, timing
from tests import factories

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
_ids = itertools.count()


def _open(email: str, at: datetime, kind: str = "opened") -> None:
    EmailEvent.objects.create(provider="ses", provider_event_id=f"e{next(_ids)}", event_type=kind,
                              recipient=email, occurred_at=at)


def test_most_frequent_local_open_hour_in_the_last_90_days():
    # Kolkata is +05:30: opens at 14:40 and 14:50 UTC are 20:10 and 20:20 local.
    for day in (1, 2, 3):
        _open("Ada@Example.com", datetime(2026, 6, day, 14, 40, tzinfo=UTC))
    _open("ada@example.com", datetime(2026, 6, 4, 3, 0, tzinfo=UTC))       # 08:30 local, once
    _open("ada@example.com", datetime(2026, 6, 5, 3, 0, tzinfo=UTC), kind="clicked")
    for n in range(5):  # older than 90 days: ignored
        _open("ada@example.com", NOW - timedelta(days=91, minutes=n))
    hours = selectors.best_open_hours(recipients={"ada@example.com": "Asia/Kolkata",
                                                  "bob@example.com": "Asia/Kolkata"}, now=NOW)
    assert hours == {"ada@example.com": 20}


def test_optimal_due_uses_the_best_hour_or_10_local_without_history():
    for day in (1, 2):
        _open("ada@example.com", datetime(2026, 6, day, 21, 5, tzinfo=UTC))  # 17:05 New York
    due = selectors.optimal_due(recipients={"ada@example.com": "America/New_York",
                                            "new@example.com": "Europe/Berlin"}, now=NOW)
    assert due == {"ada@example.com": datetime(2026, 6, 10, 21, 0, tzinfo=UTC),   # 17:00 EDT today
                   "new@example.com": datetime(2026, 6, 11, 8, 0, tzinfo=UTC)}    # 10:00 CEST tomorrow


def test_recipient_timezone_request_then_contact_then_default(settings):
    Contact.objects.create(client=factories.owner(), email="ada@example.com", timezone="Asia/Kathmandu")
    owner = factories.owner().pk
    assert selectors.recipient_timezone(client_id=owner, email="ADA@example.com") == "Asia/Kathmandu"
    assert selectors.recipient_timezone(client_id=owner, email="ada@example.com",
                                        requested="Europe/Berlin") == "Europe/Berlin"
    settings.NOTIFIER_DEFAULT_TIMEZONE = ""
    with pytest.raises(timing.TimingError) as exc:
        selectors.recipient_timezone(client_id=owner, email="nobody@example.com")
    assert exc.value.field == "timezone"
    settings.NOTIFIER_DEFAULT_TIMEZONE = "UTC"
    assert selectors.recipient_timezone(client_id=owner, email="nobody@example.com") == "UTC"
