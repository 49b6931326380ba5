"""Create a campaign from a definition and hand its fan-out to a task: the API's 202 path.

`campaign_launch` does only bounded work (validation, an emptiness probe, one INSERT), so the
API answers in milliseconds whatever the audience size; the fan-out task resolves the audience.
The scheduling engine's recurring task calls it with the same body as the API.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from rest_framework import serializers

from campaigns.audience import audience_is_empty
from campaigns.models import Campaign
from campaigns.validation import CampaignDefinitionSerializer
from notifier.priorities import Priority


@dataclass(frozen=True)
class CampaignLaunched:
    campaign: Campaign
    replayed: bool


def campaign_launch(*, definition: dict, client_id: int | None) -> Campaign:
    """Validate `definition` (raises DRF ValidationError / AudienceTooLargeError) and start it."""
    return campaign_launch_detailed(definition=definition, client_id=client_id).campaign


def campaign_launch_detailed(*, definition: dict, client_id: int | None) -> CampaignLaunched:
    serializer = CampaignDefinitionSerializer(data=definition)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    external_id = data.get("campaign_id", "")
    if external_id:
        existing = Campaign.objects.filter(client_id=client_id, external_id=external_id).first()
        if existing:
            return CampaignLaunched(existing, replayed=True)
    if audience_is_empty(data["recipients"]):
        raise serializers.ValidationError({"recipients": ["The audience is empty."]})
    version = data["template_id"]
    try:
        with transaction.atomic():
            campaign = Campaign.objects.create(
                name=data.get("name") or external_id or f"{version.template.name} campaign",
                external_id=external_id,
                client_id=client_id,
                template_version=version,
                priority=Priority.from_label(data["priority"]),
                status=Campaign.Status.QUEUED,
                metadata=data["metadata"],
                audience=data["recipients"],
                schedule=data["schedule"],
            )
            from campaigns.tasks import campaign_fanout_enqueue

            transaction.on_commit(lambda: campaign_fanout_enqueue(campaign.pk))
    except IntegrityError:
        # The same caller label won a concurrent insert.
        existing = Campaign.objects.get(client_id=client_id, external_id=external_id)
        return CampaignLaunched(existing, replayed=True)
    return CampaignLaunched(campaign, replayed=False)
