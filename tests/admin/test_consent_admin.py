"""The consent admin (issue 28): topics per service (archived, never deleted), a contact's change
page with its topic states and history, the history itself read-only."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from audience.models import ConsentChange, Contact, Topic, TopicSubscription
from clients.services import service_create
from tests.factories import owner

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    client.force_login(user)
    return client


def test_topics_are_listed_per_service_and_archived_never_deleted(operator):
    mine = Topic.objects.create(client=owner(), name="news-of-mine")
    other, _ = service_create(name="other")
    Topic.objects.create(client=other, name="their-digest")
    archived = Topic.objects.create(client=owner(), name="old-news", archived_at=timezone.now())
    page = operator.get(f"/admin/audience/topic/?client__id__exact={owner().pk}").content.decode()
    assert "news-of-mine" in page and "old-news" in page and "their-digest" not in page
    page = operator.get("/admin/audience/topic/?archived_at__isempty=1").content.decode()
    assert "news-of-mine" in page and "old-news" not in page
    assert operator.get(f"/admin/audience/topic/{mine.pk}/delete/").status_code == 403
    response = operator.post("/admin/audience/topic/", {"action": "archive", "_selected_action": [mine.pk]})
    assert response.status_code == 302
    mine.refresh_from_db()
    assert mine.archived_at is not None and Topic.objects.filter(pk=archived.pk).exists()


def test_a_topic_is_added_with_a_name_unique_in_its_service(operator):
    form = {"client": owner().pk, "name": "weekly", "description": "", "default_subscribed": "on"}
    assert operator.post("/admin/audience/topic/add/", form).status_code == 302
    for name in ("weekly", "123"):
        response = operator.post("/admin/audience/topic/add/", {**form, "name": name})
        assert response.status_code == 200 and "errorlist" in response.content.decode(), name
    assert Topic.objects.count() == 1


def test_a_contacts_page_shows_its_topic_states_and_history(operator):
    contact = Contact.objects.create(client=owner(), email="ada@example.com")
    news = Topic.objects.create(client=owner(), name="news")
    Topic.objects.create(client=owner(), name="digest", default_subscribed=False)
    TopicSubscription.objects.create(topic=news, email=contact.email, subscribed=False)
    ConsentChange.objects.create(client=owner(), email=contact.email, topic=news, subscribed=False,
                                 source="link", campaign_id=77, occurred_at=timezone.now())
    page = operator.get(f"/admin/audience/contact/{contact.pk}/change/").content.decode()
    assert "<td>news</td><td>no</td><td>their choice</td>" in page
    assert "<td>digest</td><td>no</td><td>default</td>" in page
    assert "<td>news</td><td>unsubscribed</td><td>one-click link</td><td>77</td>" in page
    assert "subscribed</div>" in page  # the broadcast stream: no unsubscribe


def test_the_consent_history_is_read_only(operator):
    change = ConsentChange.objects.create(client=owner(), email="ada@example.com", subscribed=False,
                                          source="api", occurred_at=timezone.now())
    listed = operator.get("/admin/audience/consentchange/?q=ada@example.com").content.decode()
    assert "ada@example.com" in listed
    assert operator.get("/admin/audience/consentchange/add/").status_code == 403
    assert operator.get(f"/admin/audience/consentchange/{change.pk}/delete/").status_code == 403
    operator.post(f"/admin/audience/consentchange/{change.pk}/change/", {"subscribed": "on"})
    change.refresh_from_db()
    assert change.subscribed is False
