"""Campaign-level schedules: validation of the request's `schedule`, and its compilation into
the fan-out's due map (campaigns/schedule_sql.py).

    {"type": "immediate"}                                            (default)
    {"type": "scheduled", "send_at": "2026-12-01T09:00:00+01:00"}    (offset required; future)
    {"type": "local_time", "local_time": "09:00", "date"?, "timezone"?}
    {"type": "optimal", "timezone"?}
    {"type": "recurring", "cron": "0 17 * * 5", "timezone": "Europe/Berlin"}

`timezone` on local_time/optimal is the fallback for contacts without a (valid) timezone, before
NOTIFIER_DEFAULT_TIMEZONE; with neither, a campaign whose audience has such a contact is a 400
on `schedule.timezone`. The due instants are computed once per distinct timezone (and, for
optimal, per local hour) when the fan-out starts, stored in `campaign.schedule["compiled"]` so a
restarted fan-out uses the same instants, and joined in SQL: no recipient passes through Python.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.db import connection
from rest_framework import serializers

from audience.models import Contact
from campaigns.audience import CONTACT_TABLE, audience_sql
from campaigns.models import Campaign
from scheduling import timing
from scheduling.inputs import MAX_AHEAD, parse_aware_datetime
from scheduling.selectors import OPEN_HISTORY_DAYS

ONE_OFF = ("scheduled", "local_time", "optimal")
TYPES = ("immediate", *ONE_OFF, "recurring")
# The last wall clock on Earth (UTC-12): a date whose time has passed there has passed everywhere.
LATEST_ZONE = "Etc/GMT+12"


def _error(field: str, message: str) -> serializers.ValidationError:
    return serializers.ValidationError({field: [message]})


def campaign_schedule_clean(value: object, *, now: datetime) -> dict:
    """The normalised schedule, or a ValidationError naming the field (nested under `schedule`
    by the serializer). Checks only the request; audience checks are in `audience_timezone_check`."""
    if not isinstance(value, dict):
        raise _error("type", "Must be an object.")
    kind = value.get("type", "immediate")
    if kind not in TYPES:
        raise _error("type", f"Must be one of {', '.join(TYPES)}.")
    try:
        return _clean(kind, value, now)
    except timing.TimingError as exc:
        raise _error(exc.field, str(exc)) from exc


def _clean(kind: str, value: dict, now: datetime) -> dict:
    if kind == "immediate":
        return {"type": "immediate"}
    if kind == "scheduled":
        if not value.get("send_at"):
            raise timing.TimingError("send_at", "This field is required for this type.")
        send_at = parse_aware_datetime(value["send_at"], "send_at")
        if send_at <= now:
            raise timing.TimingError("send_at", "send_at is in the past.")
        if send_at - now > MAX_AHEAD:
            raise timing.TimingError("send_at", "At most 366 days ahead.")
        return {"type": "scheduled", "send_at": send_at.astimezone(UTC).isoformat()}
    if kind == "recurring":
        cron = timing.cron_validate(value.get("cron", ""))
        tz_name = value.get("timezone") or "UTC"
        timing.zone(tz_name)
        return {"type": "recurring", "cron": cron, "timezone": tz_name}
    clean: dict = {"type": kind}
    if value.get("timezone"):
        timing.zone(value["timezone"])
        clean["timezone"] = value["timezone"]
    if kind == "local_time":
        if not value.get("local_time"):
            raise timing.TimingError("local_time", "This field is required for this type.")
        clean["local_time"] = timing.parse_local_time(value["local_time"]).isoformat()
        if value.get("date"):
            clean["date"] = _date(value["date"], clean["local_time"], now)
    return clean


def _date(raw: object, at: str, now: datetime) -> str:
    try:
        day = date.fromisoformat(str(raw))
    except ValueError as exc:
        raise timing.TimingError("date", f"Expected YYYY-MM-DD, got {raw!r}.") from exc
    if timing.local_to_utc(day, time.fromisoformat(at), timing.zone(LATEST_ZONE)) <= now:
        raise timing.TimingError("date", f"{day.isoformat()} {at} has passed in every timezone.")
    if timing.local_to_utc(day, time.fromisoformat(at), timing.zone("UTC")) - now > MAX_AHEAD:
        raise timing.TimingError("date", "At most 366 days ahead.")
    return day.isoformat()


def fallback_zone(schedule: dict) -> str:
    """The zone of contacts without one: the schedule's, else the configured default ('' if none)."""
    return schedule.get("timezone") or settings.NOTIFIER_DEFAULT_TIMEZONE or ""


def audience_timezone_check(*, schedule: dict, audience: dict) -> None:
    """local_time/optimal with no fallback zone: 400 on `schedule.timezone` if a recipient has none."""
    if schedule.get("type") not in ("local_time", "optimal") or fallback_zone(schedule):
        return
    message = ("A recipient has no timezone: give schedule.timezone, set the contacts' timezone, "
               "or configure NOTIFIER_DEFAULT_TIMEZONE.")
    if audience.get("type") == "inline":
        emails = [row["email"] for row in audience["contacts"] if not row.get("timezone")]
        known = _contact_zones(emails, client_id=audience["client_id"])
        if any(not known.get(email) for email in emails):
            raise serializers.ValidationError({"schedule": {"timezone": [message]}})
        return
    sql = audience_sql(audience)
    query = f"SELECT 1 FROM {CONTACT_TABLE} c {sql.joins} WHERE {sql.where} AND c.timezone = '' LIMIT 1"
    with connection.cursor() as cursor:
        cursor.execute(query, sql.params)
        if cursor.fetchone() is not None:
            raise serializers.ValidationError({"schedule": {"timezone": [message]}})


def _contact_zones(emails: list[str], *, client_id: str) -> dict[str, str]:
    rows = Contact.objects.filter(client_id=client_id, email__in=emails)
    return dict(rows.values_list("email", "timezone"))


def _audience_zones(campaign: Campaign) -> list[str]:
    sql = audience_sql(campaign.audience, campaign_id=campaign.id)
    query = f"SELECT DISTINCT c.timezone FROM {CONTACT_TABLE} c {sql.joins} WHERE {sql.where}"
    with connection.cursor() as cursor:
        cursor.execute(query, sql.params)
        names = [row[0] for row in cursor.fetchall() if row[0]]
    valid = []
    for name in names:
        try:
            timing.zone(name)
            valid.append(name)
        except timing.TimingError:
            continue  # such contacts fall back to the default zone
    return valid


def _next_at(at: time, tz_name: str, *, now: datetime, day: date | None) -> datetime:
    tz = timing.zone(tz_name)
    if day is None:
        return timing.next_occurrence(at, tz, now=now)
    # A given date that has passed in this zone (but not everywhere): send at once.
    return max(timing.local_to_utc(day, at, tz), now)


def campaign_schedule_compile(*, campaign: Campaign, now: datetime) -> dict:
    """The fan-out form of a one-off schedule (see campaigns/schedule_sql.py), from `now`."""
    schedule = campaign.schedule or {}
    kind = schedule.get("type", "immediate")
    if kind == "scheduled":
        return {"type": "at", "due": schedule["send_at"]}
    default_zone = fallback_zone(schedule) or "UTC"
    zones = sorted({*_audience_zones(campaign), default_zone})
    if kind == "local_time":
        at = time.fromisoformat(schedule["local_time"])
        day = date.fromisoformat(schedule["date"]) if schedule.get("date") else None
        due = {name: _next_at(at, name, now=now, day=day).isoformat() for name in zones}
        return {"type": "due_map", "due": due, "default": due[default_zone]}
    if kind == "optimal":
        due = {f"{name}|{hour}": timing.next_occurrence(time(hour), timing.zone(name), now=now).isoformat()
               for name in zones for hour in range(24)}
        start = now - timedelta(days=OPEN_HISTORY_DAYS)
        return {"type": "optimal_map", "due": due, "zones": zones, "default_zone": default_zone,
                "fallback_hour": settings.NOTIFIER_OPTIMAL_FALLBACK_HOUR,
                "window": [start.isoformat(), now.isoformat()]}
    return {"type": "immediate"}


def campaign_schedule_compiled(*, campaign: Campaign, now: datetime) -> dict:
    """The stored compiled form, computing and storing it on first use."""
    schedule = campaign.schedule or {}
    if schedule.get("type", "immediate") not in ONE_OFF:
        return {"type": "immediate"}
    if "compiled" not in schedule:
        schedule = {**schedule, "compiled": campaign_schedule_compile(campaign=campaign, now=now)}
        Campaign.objects.filter(pk=campaign.pk).update(schedule=schedule)
        campaign.schedule = schedule
    return schedule["compiled"]


# A campaign's rows wait at most this long after "now" when its schedule is not compiled yet (no
# date): the next occurrence of a wall time in the latest zone, or an optimal hour, plus margin.
_UNCOMPILED_WAIT = timedelta(days=2)


def campaign_last_due(schedule: dict | None, *, now: datetime) -> datetime | None:
    """The latest time a row of a one-off scheduled campaign waits to be sent until (None: an
    immediate or recurring one: its rows are written when they are sent). From the compiled due
    instants when the fan-out has compiled them, else an upper bound from the request: what
    personal-data retention may not be shorter than (decision 120)."""
    schedule = schedule or {}
    kind = schedule.get("type", "immediate")
    if kind not in ONE_OFF:
        return None
    compiled = schedule.get("compiled")
    if compiled:
        due = compiled.get("due")
        instants = [due] if isinstance(due, str) else list((due or {}).values())
        return max((datetime.fromisoformat(at) for at in instants), default=None)
    if kind == "scheduled":
        return datetime.fromisoformat(schedule["send_at"])
    if kind == "local_time" and schedule.get("date"):
        day, at = date.fromisoformat(schedule["date"]), time.fromisoformat(schedule["local_time"])
        return max(timing.local_to_utc(day, at, timing.zone(LATEST_ZONE)), now)
    return now + _UNCOMPILED_WAIT
