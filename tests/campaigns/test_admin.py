"""Campaign admin: pages render with per-status counts; actions go through the lifecycle services."""

from __future__ import annotations

import pytest

from audience.models import ContactList
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from tests import factories
from tests.campaigns.helpers import contacts_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@x.io", "pw")
    client.force_login(user)
    return client


def test_campaign_pages_and_actions(admin_client, purged_queues):
    contacts_create(30)
    definition = {"conditions": [{"attribute": "n", "op": "lt", "value": 20}]}
    campaign = Campaign.objects.create(
        name="c", template_version=factories.template_version(), status="QUEUED",
        audience={"client_id": factories.owner().pk, "type": "segment", "definition": definition},
    )
    campaign_fanout(campaign_id=campaign.pk)
    assert admin_client.get("/admin/campaigns/campaign/").status_code == 200
    page = admin_client.get(f"/admin/campaigns/campaign/{campaign.pk}/change/")
    assert page.status_code == 200 and b"<th>queued</th><td>20</td>" in page.content
    action = {"action": "pause", "_selected_action": [campaign.pk]}
    response = admin_client.post("/admin/campaigns/campaign/", action)
    assert response.status_code == 302
    assert Campaign.objects.get(pk=campaign.pk).status == "PAUSED"
    admin_client.post("/admin/campaigns/campaign/", {"action": "cancel", "_selected_action": [campaign.pk]})
    assert Campaign.objects.get(pk=campaign.pk).status == "CANCELLED"
    for url in ("/admin/audience/contact/", "/admin/audience/contact/?q=user3@example.com",
                "/admin/audience/suppression/", "/admin/audience/segment/"):
        assert admin_client.get(url).status_code == 200
    contact_list = ContactList.objects.create(client=factories.owner(), name="l")
    assert admin_client.get(f"/admin/audience/contactlist/{contact_list.pk}/change/").status_code == 200
