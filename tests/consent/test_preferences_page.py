"""The preference page (issue 28): a signed, expiring link per service and address; GET shows and
changes nothing; POST (CSRF-protected) applies the choices with their history; every link we
cannot honour gets one generic answer; an address suppressed everywhere cannot come back."""

from __future__ import annotations

import re
import time

import pytest
from django.test import Client

from audience.models import ConsentChange, Contact, Suppression, Topic, TopicSubscription
from clients.services import service_create
from consent.tokens import preference_token, preferences_url
from delivery.extensions import message_headers
from tests import factories

pytestmark = pytest.mark.django_db
EMAIL = "ada@x.io"


@pytest.fixture
def topics():
    service = factories.owner()
    news = Topic.objects.create(client=service, name="Product news")
    digest = Topic.objects.create(client=service, name="Weekly digest", description="Every Monday")
    Topic.objects.create(client=service, name="Old", archived_at="2026-01-01T00:00:00Z")
    return news, digest


def page_path(service_id: str | None = None, email: str = EMAIL, **kwargs) -> str:
    return f"/p/{preference_token(service_id=service_id or factories.owner().pk, email=email, **kwargs)}/"


def csrf_of(client: Client, path: str) -> str:
    page = client.get(path)
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)


def save(client: Client, path: str, *, shown, topics=(), leave=False, **headers):
    data = {"csrfmiddlewaretoken": csrf_of(client, path), "shown": [t.pk for t in shown],
            "topic": [t.pk for t in topics]}
    if leave:
        data["leave_broadcast"] = "on"
    return client.post(path, data, **headers)


def states(*topics: Topic) -> list[bool]:
    chosen = TopicSubscription.objects.filter(email=EMAIL)
    return [chosen.filter(topic=t).values_list("subscribed", flat=True).first() for t in topics]


def test_get_lists_live_topics_with_choices_and_changes_nothing(topics):
    news, digest = topics
    TopicSubscription.objects.create(topic=digest, email=EMAIL, subscribed=False)
    page = Client().get(page_path())
    body = page.content.decode()
    assert page.status_code == 200
    assert f'id="topic-{news.pk}" checked' in body and f'id="topic-{digest.pk}" aria' in body
    assert f'<label for="topic-{news.pk}">Product news</label>' in body and "Every Monday" in body
    assert "Old" not in body and 'lang="en"' in body and EMAIL in body
    assert page["Content-Security-Policy"].startswith("default-src 'none'; style-src 'self'")
    assert "form-action 'self'" in page["Content-Security-Policy"]
    assert page["Referrer-Policy"] == "same-origin" and page["Cache-Control"] == "no-store"
    assert not ConsentChange.objects.exists() and states(news) == [None]


def test_post_applies_choices_with_history_and_confirms(topics):
    news, digest = topics
    client, path = Client(enforce_csrf_checks=True), page_path()
    response = save(client, path, shown=topics, topics=[digest])  # leaves news, digest stays
    assert response.status_code == 200 and 'id="saved"' in response.content.decode()
    assert states(news, digest) == [False, None]
    response = save(client, path, shown=topics, topics=[news, digest], leave=True)
    assert states(news, digest) == [True, None]
    assert Suppression.objects.filter(email=EMAIL, scope="broadcast").exists()
    assert 'id="leave-broadcast" checked' in response.content.decode()
    save(client, path, shown=topics, topics=[news, digest])  # back to all broadcast mail
    assert not Suppression.objects.exists()
    history = ConsentChange.objects.order_by("id").values_list("topic_id", "subscribed", "source")
    assert list(history) == [(news.pk, False, "preference_page"), (news.pk, True, "preference_page"),
                             (None, False, "preference_page"), (None, True, "preference_page")]


def test_post_without_csrf_token_is_refused(topics):
    response = Client(enforce_csrf_checks=True).post(page_path(), {"shown": [topics[0].pk]})
    assert response.status_code == 403
    assert states(topics[0]) == [None]


def test_a_topic_the_form_did_not_show_is_left_alone(topics):
    news, digest = topics
    client, path = Client(), page_path()
    save(client, path, shown=[news], topics=[news])  # digest created after the page was loaded
    assert states(news, digest) == [None, None] and not ConsentChange.objects.exists()


def test_forged_altered_expired_and_foreign_links_get_one_generic_answer(topics):
    other, _ = service_create(name="other")
    Contact.objects.create(client=factories.owner(), email=EMAIL)
    good = page_path()
    value, signature = good.strip("/").removeprefix("p/").rsplit(":", 1)
    bad_paths = [
        page_path(at=time.time() - 91 * 86400),  # expired
        f"/p/{value.replace('YWRh', 'Ym9i')}:{signature}/",  # another address, same signature
        f"/p/{value.replace(factories.owner().pk, other.pk)}:{signature}/",  # another service
        good[:-3] + "/",  # altered signature
        "/p/garbage/",
        page_path(service_id="svc_gone"),  # a service that does not exist
        page_path(email="nobody@x.io")[:-3] + "/",  # an address that is no contact, altered
    ]
    answers = set()
    for path in bad_paths:
        for method in ("get", "post"):
            response = getattr(Client(), method)(path, {"shown": [topics[0].pk], "leave_broadcast": "on"})
            answers.add((response.status_code, response.content))
    assert len(answers) == 1 and next(iter(answers))[0] == 404
    assert not ConsentChange.objects.exists() and not Suppression.objects.exists()
    # A real link of the other service changes only that service's standing.
    save(Client(), page_path(service_id=other.pk), shown=[], leave=True)
    assert list(Suppression.objects.values_list("client_id", flat=True)) == [other.pk]


def test_an_address_suppressed_everywhere_is_told_and_cannot_come_back(topics):
    news, digest = topics
    Suppression.objects.create(email=EMAIL, reason="hard_bounce", source="ses")
    client, path = Client(), page_path()
    body = client.get(path).content.decode()
    assert 'id="blocked"' in body
    save(client, path, shown=topics, topics=[digest])  # leaving is allowed
    assert states(news) == [False]
    response = save(client, path, shown=topics, topics=[news, digest])  # joining is not
    assert response.status_code == 409 and 'id="refused"' in response.content.decode()
    assert states(news) == [False]
    assert ConsentChange.objects.count() == 1


def test_the_page_speaks_the_contacts_locale_else_the_browsers(topics):
    Contact.objects.create(client=factories.owner(), email=EMAIL, locale="fr_CA")
    page = Client().get(page_path(), HTTP_ACCEPT_LANGUAGE="en")
    body = page.content.decode()
    assert 'lang="fr"' in body and "Préférences d\u2019e-mail" in body and "Enregistrer" in body
    assert page["Content-Language"] == "fr"
    stranger = Client().get(page_path(email="bob@x.io"), HTTP_ACCEPT_LANGUAGE="de, fr;q=0.8")
    stranger = stranger.content.decode()
    assert 'lang="fr"' in stranger and "Sujets" in stranger
    english = Client().get(page_path(email="eve@x.io"), HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert 'lang="en"' in english and "Topics" in english


def test_the_unsubscribe_pages_link_to_the_preference_page(topics):
    message = factories.email_message(client=factories.owner(), stream="broadcast", recipient=EMAIL)
    url = message_headers(message)["List-Unsubscribe"].strip("<>").removeprefix("http://127.0.0.1:8000")
    for response in (Client().get(url), Client().post(url)):
        link = re.search(r'href="http://127.0.0.1:8000(/p/[^"]+)"', response.content.decode()).group(1)
        assert "Product news" in Client().get(link).content.decode()
    # Neither kind of token opens the other page.
    token = preferences_url(service_id=factories.owner().pk, email=EMAIL).split("/p/")[1]
    assert Client().post(f"/u/{token}").status_code == 404
    assert Client().get(url.replace("/u/", "/p/")).status_code == 404
