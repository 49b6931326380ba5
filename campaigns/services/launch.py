"""Create a campaign from a definition and hand its fan-out to a task: the API's 202 path.

`campaign_launch` does only bounded work (validation, an emptiness probe, one INSERT), so the
API answers in milliseconds whatever the audience size; the fan-out task resolves the audience.
The scheduling engine's recurring task calls it with the same body as the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import serializers

from campaigns.audience import audience_is_empty
from campaigns.campaign_schedule import ONE_OFF, audience_timezone_check, fallback_zone
from campaigns.jobs import campaign_fanout_enqueue
from campaigns.models import Campaign
from campaigns.validation import CampaignDefinitionSerializer
from clients.key_types import KeyType
from clients.models import Service
from core.priorities import Priority
from scheduling.models import Schedule
from scheduling.services.one_off import schedule_record_campaign
from scheduling.services.recurring import schedule_create_recurring


@dataclass(frozen=True)
class CampaignLaunched:
    campaign: Campaign | None
    replayed: bool
    # A recurring definition creates a schedule (and no campaign until its first run).
    schedule: Schedule | None = None


def campaign_launch_run(definition: dict, client_id: int | None, key_type: str) -> Campaign | None:
    """One run of a recurring schedule (registered with scheduling/extensions.py), of the
    schedule's key type."""
    return campaign_launch(definition=definition, client_id=client_id, key_type=key_type)


def campaign_definition_validate(definition: dict, client_id: str | None) -> dict:
    """A recurring schedule's definition is refused at creation if a run of this client could
    not launch it (another client's template, list, segment or topic included). Returns the
    definition to store: a topic named by name is kept by id, so renaming the topic does not
    stop the schedule's runs (archiving it does: a run then launches nothing)."""
    serializer = CampaignDefinitionSerializer(data=definition, context={"client_id": client_id})
    serializer.is_valid(raise_exception=True)
    topic = serializer.validated_data.get("topic")
    return definition if topic is None else {**definition, "topic": topic.pk}


def campaign_launch(
    *, definition: dict, client_id: int | None, key_type: str = KeyType.LIVE
) -> Campaign | None:
    """Validate `definition` (raises DRF ValidationError / AudienceTooLargeError) and start it.

    `definition["schedule_run"]` ({schedule_id, run}, set by a recurring schedule's run) makes
    the launch idempotent per (schedule, run): the campaign's label is `schedule:<id>:run:<n>`,
    unique per client, so a repeated run returns the campaign the first one created.
    `key_type`: the caller's key's; the campaign's messages (and a recurring schedule's runs)
    inherit it (issue 27).
    """
    return campaign_launch_detailed(definition=definition, client_id=client_id, key_type=key_type).campaign


def _external_id(definition: dict, data: dict) -> str:
    run = definition.get("schedule_run") if isinstance(definition, dict) else None
    if isinstance(run, dict) and run.get("schedule_id") is not None:
        return f"schedule:{int(run['schedule_id'])}:run:{int(run.get('run') or 0)}"
    return data.get("campaign_id", "")


def campaign_launch_detailed(
    *, definition: dict, client_id: int | None, key_type: str = KeyType.LIVE
) -> CampaignLaunched:
    serializer = CampaignDefinitionSerializer(data=definition, context={"client_id": client_id})
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    if data["schedule"]["type"] == "recurring":
        schedule = _recurring_create(definition, data, client_id, key_type)
        return CampaignLaunched(None, replayed=False, schedule=schedule)
    external_id = _external_id(definition, data)
    if external_id:
        existing = Campaign.objects.filter(client_id=client_id, external_id=external_id).first()
        if existing:
            return CampaignLaunched(existing, replayed=True)
    if audience_is_empty(data["recipients"]):
        raise serializers.ValidationError({"recipients": ["The audience is empty."]})
    audience_timezone_check(schedule=data["schedule"], audience=data["recipients"])
    version = data["template_id"]
    scheduled = data["schedule"]["type"] in ONE_OFF
    try:
        with transaction.atomic():
            campaign = Campaign.objects.create(
                name=data.get("name") or data.get("campaign_id") or f"{version.template.name} campaign",
                external_id=external_id,
                client_id=client_id,
                template_version=version,
                priority=Priority.from_label(data["priority"]),
                status=Campaign.Status.SCHEDULED if scheduled else Campaign.Status.QUEUED,
                metadata=data["metadata"],
                audience=data["recipients"],
                schedule=data["schedule"],
                key_type=key_type,
                topic=data.get("topic"),
            )
            if scheduled:
                _one_off_record(campaign)
            transaction.on_commit(lambda: campaign_fanout_enqueue(campaign.pk))
    except IntegrityError:
        # The same caller label won a concurrent insert.
        existing = Campaign.objects.get(client_id=client_id, external_id=external_id)
        return CampaignLaunched(existing, replayed=True)
    return CampaignLaunched(campaign, replayed=False)


def _one_off_record(campaign: Campaign) -> Schedule:
    schedule = campaign.schedule
    send_at = datetime.fromisoformat(schedule["send_at"]) if schedule.get("send_at") else None
    return schedule_record_campaign(
        client_id=campaign.client_id, campaign_id=campaign.pk, name=campaign.name, type=schedule["type"],
        scheduled_at=send_at, timezone=fallback_zone(schedule) or "UTC", definition={},
        key_type=campaign.key_type,
    )


def _recurring_create(definition: dict, data: dict, client_id: int | None, key_type: str) -> Schedule:
    """A recurring schedule whose every run launches this definition as an immediate campaign."""
    stored = {k: v for k, v in definition.items() if k not in ("schedule", "schedule_run")}
    stored["schedule"] = {"type": "immediate"}
    schedule = data["schedule"]
    client = Service.objects.filter(pk=client_id).first() if client_id else None
    name = data.get("name") or data.get("campaign_id") or f"{data['template_id'].template.name} recurring"
    return schedule_create_recurring(client=client, name=name, cron=schedule["cron"],
                                     timezone=schedule["timezone"], definition=stored, now=timezone.now(),
                                     key_type=key_type)
