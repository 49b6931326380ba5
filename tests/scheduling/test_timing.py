"""scheduling.timing: wall-clock -> UTC across DST and odd offsets; cron previews. Time injected."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

import pytest
from django.db import connection

from scheduling import timing

NY = timing.zone("America/New_York")
BERLIN = timing.zone("Europe/Berlin")


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(("tz", "day", "at", "expected"), [
    ("America/New_York", date(2026, 3, 7), time(9), utc(2026, 3, 7, 14)),   # EST, day before
    ("America/New_York", date(2026, 3, 9), time(9), utc(2026, 3, 9, 13)),   # EDT, day after
    ("America/New_York", date(2026, 3, 8), time(2, 30), utc(2026, 3, 8, 7, 30)),  # gap -> 03:30 EDT
    ("America/New_York", date(2026, 11, 1), time(1, 30), utc(2026, 11, 1, 5, 30)),  # overlap: 1st
    ("Europe/Berlin", date(2026, 3, 29), time(2, 30), utc(2026, 3, 29, 1, 30)),  # gap -> 03:30 CEST
    ("Europe/Berlin", date(2026, 10, 25), time(2, 30), utc(2026, 10, 25, 0, 30)),  # overlap: CEST
    ("Europe/Berlin", date(2026, 10, 26), time(9), utc(2026, 10, 26, 8)),   # CET after
    ("Asia/Kolkata", date(2026, 6, 1), time(9), utc(2026, 6, 1, 3, 30)),    # +05:30
    ("Asia/Kathmandu", date(2026, 6, 1), time(9), utc(2026, 6, 1, 3, 15)),  # +05:45
    ("Asia/Kathmandu", date(2026, 6, 1), time(0, 10), utc(2026, 5, 31, 18, 25)),  # previous UTC day
])
def test_local_to_utc(tz, day, at, expected):
    assert timing.local_to_utc(day, at, timing.zone(tz)) == expected


def test_a_gap_is_detected_explicitly():
    assert timing.is_gap(datetime(2026, 3, 8, 2, 30), NY)
    assert not timing.is_gap(datetime(2026, 3, 8, 3, 0), NY)
    assert not timing.is_gap(datetime(2026, 11, 1, 1, 30), NY)  # an overlap is not a gap


def test_next_occurrence_is_today_or_tomorrow_across_the_dst_change():
    before = utc(2026, 3, 7, 13, 59)  # 08:59 EST
    assert timing.next_occurrence(time(9), NY, now=before) == utc(2026, 3, 7, 14)
    passed = utc(2026, 3, 7, 15)  # 10:00 EST: tomorrow, which is EDT
    assert timing.next_occurrence(time(9), NY, now=passed) == utc(2026, 3, 8, 13)
    # Kathmandu is already on the next calendar day at 20:00 UTC.
    assert timing.next_occurrence(time(9), timing.zone("Asia/Kathmandu"),
                                  now=utc(2026, 6, 1, 20)) == utc(2026, 6, 2, 3, 15)


def test_next_occurrence_on_a_given_past_date_is_an_error_on_date():
    with pytest.raises(timing.TimingError) as exc:
        timing.next_occurrence(time(9), NY, now=utc(2026, 3, 7, 15), day=date(2026, 3, 7))
    assert exc.value.field == "date"
    assert timing.next_occurrence(time(9), NY, now=utc(2026, 3, 7, 15),
                                  day=date(2026, 3, 9)) == utc(2026, 3, 9, 13)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "EST5EDT "])
def test_unknown_timezones_are_an_error_on_timezone(name):
    with pytest.raises(timing.TimingError) as exc:
        timing.zone(name)
    assert exc.value.field == "timezone"


@pytest.mark.parametrize("value", ["9am", "25:00", "09:00+02:00", ""])
def test_bad_local_times_are_an_error_on_local_time(value):
    with pytest.raises(timing.TimingError) as exc:
        timing.parse_local_time(value)
    assert exc.value.field == "local_time"


@pytest.mark.django_db
def test_due_by_timezone_once_per_zone_joins_in_sql():
    now = utc(2026, 10, 24, 12)
    names = ["Europe/Berlin", "Asia/Kolkata", "America/New_York"] * 1000
    due = timing.due_by_timezone(time(9), names, now=now)
    assert due == {"Europe/Berlin": utc(2026, 10, 25, 8), "Asia/Kolkata": utc(2026, 10, 25, 3, 30),
                   "America/New_York": utc(2026, 10, 24, 13)}
    values, params = timing.due_values_sql(due)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT r.tz, due.due_at FROM (VALUES ('Asia/Kolkata'), ('Europe/Berlin')) "
                       f"AS r(tz) JOIN {values} ON due.timezone = r.tz ORDER BY 1", params)
        assert cursor.fetchall() == [("Asia/Kolkata", utc(2026, 10, 25, 3, 30)),
                                     ("Europe/Berlin", utc(2026, 10, 25, 8))]


def test_cron_daily_9am_stays_at_9am_local_across_dst():
    runs = timing.cron_next_runs("0 9 * * *", NY, after=utc(2026, 3, 6), count=4)
    assert runs == [utc(2026, 3, 6, 14), utc(2026, 3, 7, 14), utc(2026, 3, 8, 13), utc(2026, 3, 9, 13)]
    autumn = timing.cron_next_runs("0 17 * * 5", BERLIN, after=utc(2026, 10, 20), count=2)
    assert autumn == [utc(2026, 10, 23, 15), utc(2026, 10, 30, 16)]  # Fridays, CEST then CET


def test_cron_in_the_gap_is_shifted_forward_and_in_the_overlap_runs_once():
    gap = timing.cron_next_runs("30 2 * * *", NY, after=utc(2026, 3, 7, 12), count=2)
    assert gap == [utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30)]
    overlap = timing.cron_next_runs("30 1 * * *", NY, after=utc(2026, 10, 31, 12), count=2)
    assert overlap == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
    half_hourly = timing.cron_next_runs("*/30 * * * *", NY, after=utc(2026, 3, 8, 6), count=4)
    assert half_hourly == [utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7), utc(2026, 3, 8, 7, 30),
                           utc(2026, 3, 8, 8)]  # 01:30 EST, 03:00 EDT (02:00 gap), 03:30, 04:00


@pytest.mark.parametrize("expression", ["61 * * * *", "* * *", "0 9 * * * *", "every friday", ""])
def test_invalid_cron_is_an_error_on_cron(expression):
    with pytest.raises(timing.TimingError) as exc:
        timing.cron_validate(expression)
    assert exc.value.field == "cron"
