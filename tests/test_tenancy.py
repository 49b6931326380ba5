"""Tenancy (decision 50): client B can neither read nor change client A's objects, on every route.

The walk goes over every route of the URL conf. An object route is called with A's ids for every
method its view allows, as B (every scope but admin), and must answer 404, the answer for a
missing id, so an id leaks nothing. A collection route must never show A's rows to B, and what
B writes there stays B's. A route the walk does not know fails the test: a new route has to be
classified here, so it cannot forget tenancy.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from audience.models import ConsentChange, Contact, ContactList, Segment, Suppression, Topic
from callbacks.models import WebhookEndpoint
from callbacks.services.endpoints import endpoint_create
from campaigns.models import Campaign
from clients.models import ApiKey, Service, TeamMember
from clients.oauth_models import OAuthClient
from clients.oauth_services import oauth_client_create
from clients.services import api_key_create, service_create
from delivery.models import EmailMessage
from scheduling.models import Schedule
from templates.models import Template
from tests import factories
from tests.support.migrations import latest_migrations, migrate_to

SECRET = "a-secret"  # in every name and address of A's rows: B must never see it
METHODS = ("get", "post", "put", "patch", "delete")

# Routes with no client data, each with the reason it is outside tenancy.
NOT_TENANT_DATA = {
    "api/v1/schema/": "the API description",
    "api/v1/docs/": "the API description",
    "api/v1/redoc/": "the API description",
    "api/v1/redoc/redoc.standalone.js": "the API description's script",
    "api/v1/providers": "platform: the configured ESPs",
    "api/v1/stats/overview": "platform: throughput, queues, workers, providers",
    "u/<str:token>/": "the signed unsubscribe link is the credential, no API key",
    "p/<str:token>/": "the signed preference link is the credential (one service and address), no API key",
    "healthz": "liveness, no data",
    "oauth/token": "OAuth2 token endpoint: the client's id and secret are the credential, no API key",
    "": "the front page: links, no data",
    "tour/": "the README's tour, no data",
    "admin/": "Django admin: staff only, sees every client's rows",
    "webhooks/ses/": "signed ESP webhooks, no API key",
    "webhooks/sendgrid/": "signed ESP webhooks, no API key",
    "webhooks/mailgun/": "signed ESP webhooks, no API key",
    "dashboard/": "operator dashboard: staff only, sees all",
    "dashboard/data.json": "operator dashboard: staff only, sees all",
    "dashboard/campaigns/<id:campaign_id>/<str:action>": "operator dashboard: staff only",
    "metrics": "Prometheus: operators only, platform figures",
}


@dataclass
class Tenant:
    client: Service
    api: APIClient


def _tenant(name: str, scopes: list[str] | None = None) -> Tenant:
    client, key = service_create(name=name, scopes=scopes, rate_limit="100000/min")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return Tenant(client, api)


@dataclass
class Objects:
    template: Template
    contact: Contact
    contact_list: ContactList
    segment: Segment
    campaign: Campaign
    schedule: Schedule
    message: EmailMessage
    suppression: Suppression
    api_key: ApiKey
    team_member: TeamMember
    oauth_client: OAuthClient
    topic: Topic
    webhook: WebhookEndpoint


def _objects_of(owner: Service) -> Objects:
    version = factories.template_version(client=owner, name=f"{SECRET}-otp")
    contact = Contact.objects.create(client=owner, email=f"ada@{SECRET}.example", name=SECRET,
                                     timezone="Europe/Paris")
    contact_list = ContactList.objects.create(client=owner, name=f"{SECRET}-list")
    contact_list.contacts.add(contact)
    segment = Segment.objects.create(client=owner, name=f"{SECRET}-segment", definition={
        "conditions": [{"field": "subscribed", "op": "equals", "value": True}]})
    campaign = Campaign.objects.create(
        client=owner, name=f"{SECRET}-campaign", template_version=version, status=Campaign.Status.SENDING,
        audience={"client_id": owner.pk, "type": "list", "list_id": contact_list.pk})
    schedule = Schedule.objects.create(client=owner, name=f"{SECRET}-schedule", type="recurring",
                                       cron="0 9 * * *", definition={"template_id": version.template_id})
    message = factories.email_message(
        client=owner, version=version, recipient=contact.email, status=EmailMessage.Status.SCHEDULED,
        scheduled_for=timezone.now() + timedelta(days=1), cancel_key=f"{SECRET}-key")
    suppression = Suppression.objects.create(email=f"gone@{SECRET}.example", reason="complaint",
                                             source=f"{SECRET}-source", client=owner)
    api_key, _ = api_key_create(service=owner, name=f"{SECRET}-key")
    member = TeamMember.objects.create(service=owner, email=f"dev@{SECRET}.example")
    oauth_client, _ = oauth_client_create(service=owner, name=f"{SECRET}-job")
    topic = Topic.objects.create(client=owner, name=f"{SECRET}-topic", description=SECRET)
    webhook = endpoint_create(service_id=owner.pk, url=f"https://hooks.{SECRET}.example/in",
                              event_types=["message.sent"])
    return Objects(version.template, contact, contact_list, segment, campaign, schedule, message,
                   suppression, api_key, member, oauth_client, topic, webhook)


def _routes(patterns: list, prefix: str = "") -> Iterator[tuple[str, URLPattern | URLResolver]]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        # An include() at "" shares its route with the front page: only a named prefix
        # ("admin/") keeps the walk out of a whole resolver.
        if isinstance(pattern, URLResolver) and (not route or route not in NOT_TENANT_DATA):
            yield from _routes(pattern.url_patterns, route)
        else:
            yield route, pattern


def _methods(pattern: URLPattern) -> list[str]:
    view = getattr(pattern.callback, "view_class", None)
    return [method for method in METHODS if view is not None and hasattr(view, method)]


def _call(api: APIClient, method: str, url: str, body: dict | None = None):
    if method == "get":
        return api.get(url, body or {})
    return getattr(api, method)(url, body or {}, format="json")


# Object routes: the ids of A's objects that fill the route, and a plausible body per method.
OBJECT_ROUTES: dict[str, Callable[[Objects], dict]] = {
    "api/v1/templates/<id:template_id>": lambda a: {"template_id": a.template.pk},
    "api/v1/templates/<id:template_id>/render": lambda a: {"template_id": a.template.pk},
    "api/v1/templates/<id:template_id>/preview": lambda a: {"template_id": a.template.pk},
    "api/v1/messages/<id:message_id>": lambda a: {"message_id": a.message.pk},
    "api/v1/messages/<id:message_id>/events": lambda a: {"message_id": a.message.pk},
    "api/v1/schedules/<id:schedule_id>": lambda a: {"schedule_id": a.schedule.pk},
    "api/v1/schedules/<id:schedule_id>/pause": lambda a: {"schedule_id": a.schedule.pk},
    "api/v1/schedules/<id:schedule_id>/resume": lambda a: {"schedule_id": a.schedule.pk},
    "api/v1/campaigns/<id:campaign_id>": lambda a: {"campaign_id": a.campaign.pk},
    "api/v1/campaigns/<id:campaign_id>/pause": lambda a: {"campaign_id": a.campaign.pk},
    "api/v1/campaigns/<id:campaign_id>/resume": lambda a: {"campaign_id": a.campaign.pk},
    "api/v1/campaigns/<id:campaign_id>/cancel": lambda a: {"campaign_id": a.campaign.pk},
    "api/v1/campaigns/<id:campaign_id>/test": lambda a: {"campaign_id": a.campaign.pk},
    "api/v1/campaigns/<id:campaign_id>/stats": lambda a: {"campaign_id": a.campaign.pk},
    "api/v1/suppressions/<str:email>": lambda a: {"email": a.suppression.email},
    "api/v1/keys/<str:key_id>": lambda a: {"key_id": a.api_key.prefix},
    "api/v1/team-members/<id:member_id>": lambda a: {"member_id": a.team_member.pk},
    "api/v1/oauth-clients/<str:client_id>": lambda a: {"client_id": a.oauth_client.client_id},
    "api/v1/topics/<id:topic_id>": lambda a: {"topic_id": a.topic.pk},
    "api/v1/contacts/<str:contact>/preferences": lambda a: {"contact": a.contact.pk},
    **{f"api/v1/webhooks/<id:webhook_id>{tail}": lambda a: {"webhook_id": a.webhook.pk}
       for tail in ("", "/rotate-secret", "/deliveries", "/replay")},
}
BODIES: dict[tuple[str, str], Callable[[Objects], dict]] = {
    ("api/v1/templates/<id:template_id>", "put"):
        lambda a: {"subject": "Reset", "html_body": "<a href='https://phish.example'>reset</a>"},
    ("api/v1/templates/<id:template_id>/render", "post"): lambda a: {"context": {"name": "x"}},
    ("api/v1/templates/<id:template_id>/preview", "get"): lambda a: {"contact": a.contact.email},
    ("api/v1/campaigns/<id:campaign_id>/test", "post"): lambda a: {"emails": ["b@b.example"]},
    ("api/v1/topics/<id:topic_id>", "patch"): lambda a: {"description": "B's"},
    ("api/v1/webhooks/<id:webhook_id>", "patch"): lambda a: {"events": ["message.bounced"]},
    ("api/v1/webhooks/<id:webhook_id>/replay", "post"): lambda a: {"since": "2026-01-01T00:00:00Z"},
    ("api/v1/contacts/<str:contact>/preferences", "put"):
        lambda a: {"broadcast": False, "topics": {str(a.topic.pk): False}},
}


def _url(route: str, kwargs: dict) -> str:
    for name, value in kwargs.items():
        route = route.replace(f"<id:{name}>", str(value)).replace(f"<str:{name}>", str(value))
    assert "<" not in route, f"the walk cannot fill {route}"
    return "/" + route


def _collection_checks(a: Objects, b: Tenant, kind: str = "first key"
                       ) -> dict[tuple[str, str], Callable[[], None]]:
    """What B may do on a collection route, and what proves A's rows are untouched. A team key
    is refused a list audience before the list is even looked up: the 400 names `recipients`;
    test and team keys may not make OAuth clients (their tokens act as live keys): a 403."""
    team_key = kind == "team key"

    def created_own(url: str, body: dict, model: type, name: str) -> Callable[[], None]:
        def check() -> None:
            response = b.api.post(url, body, format="json")
            assert response.status_code in (200, 201), response.content
            assert model.objects.filter(client=b.client, name=name).exists()
        return check

    def send(body: dict, field: str) -> Callable[[], None]:
        def check() -> None:
            response = b.api.post("/api/v1/messages" if "to" in body else "/api/v1/notifications/email",
                                  body, format="json")
            assert response.status_code == 400, response.content
            assert field in str(response.json()), response.json()
        return check

    def send_batch() -> None:
        """A's template in B's batch is B's missing template: a 400 naming the item's field."""
        response = b.api.post("/api/v1/messages/batch", {"messages": [
            {"to": "x@b.example", "template": str(a.template.pk), "context": {"name": "x"}}]},
            format="json")
        assert response.status_code == 400, response.content
        assert list(response.json()["error"]["fields"]) == ["messages[0].template"], response.json()

    def bulk() -> None:
        response = b.api.post("/api/v1/contacts/bulk", {"list": a.contact_list.name, "contacts": [
            {"email": a.contact.email, "name": "B's"}]}, format="json")
        assert response.status_code == 200 and response.json()["created"] == 1, response.content

    def cancel_by_key() -> None:
        response = b.api.post("/api/v1/schedules/cancel", {"cancel_key": a.message.cancel_key}, format="json")
        assert response.status_code == 200 and response.json()["cancelled"] == 0, response.content

    def new_schedule() -> None:
        definition = {"template_id": str(version.template_id),
                      "recipients": {"type": "inline", "contacts": [{"email": "b@b.example"}]}}
        response = b.api.post("/api/v1/schedules", {"name": a.schedule.name, "type": "recurring",
                              "cron": "0 9 * * *", "definition": definition}, format="json")
        assert response.status_code == 201 and response.json()["id"] != a.schedule.pk, response.content

    def new_key() -> None:
        response = b.api.post("/api/v1/keys", {"name": a.api_key.name, "type": "test"}, format="json")
        assert response.status_code == 201, response.content
        assert ApiKey.objects.get(prefix=response.json()["id"]).service == b.client

    def team_member() -> None:
        response = b.api.post("/api/v1/team-members", {"email": a.team_member.email}, format="json")
        assert response.status_code == 201, response.content
        assert TeamMember.objects.filter(service=b.client, email=a.team_member.email).exists()

    def new_oauth_client() -> None:
        response = b.api.post("/api/v1/oauth-clients", {"name": a.oauth_client.name}, format="json")
        if kind in ("test key", "team key"):
            assert response.status_code == 403, response.content
            return
        assert response.status_code == 201, response.content
        assert OAuthClient.objects.get(client_id=response.json()["client_id"]).service == b.client

    def suppress_again() -> None:
        """B may suppress an address A's mail already suppressed, and learns nothing of A's row."""
        response = b.api.post("/api/v1/suppressions", {"email": a.suppression.email}, format="json")
        assert response.status_code == 200 and SECRET not in response.json()["source"], response.content

    def own_webhook() -> None:
        response = b.api.post("/api/v1/webhooks", {"url": a.webhook.url, "events": ["message.sent"]},
                              format="json")
        assert response.status_code == 201, response.content
        assert WebhookEndpoint.objects.filter(service=b.client, url=a.webhook.url).exists()

    def own_retention() -> None:
        """B changes its own service's retention only (a test key may not: a 403)."""
        response = b.api.patch("/api/v1/service", {"retention": {"broadcast": {"personal_data_days": 3}}},
                               format="json")
        if kind == "test key":
            assert response.status_code == 403, response.content
            return
        assert response.status_code == 200, response.content
        assert Service.objects.get(pk=b.client.pk).retention == {"broadcast": {"personal_data_days": 3}}

    version = factories.template_version(client=b.client, name="b-own")
    return {
        ("api/v1/service", "patch"): own_retention,
        ("api/v1/templates", "post"): created_own("/api/v1/templates", {
            "name": a.template.name, "subject": "s", "html_body": "<p>b</p>"}, Template, a.template.name),
        ("api/v1/lists", "post"): created_own("/api/v1/lists", {"name": a.contact_list.name}, ContactList,
                                              a.contact_list.name),
        ("api/v1/segments", "post"): created_own("/api/v1/segments", {
            "name": a.segment.name, "definition": a.segment.definition}, Segment, a.segment.name),
        ("api/v1/contacts/bulk", "post"): bulk,
        ("api/v1/messages", "post"): send({"to": "x@b.example", "template": str(a.template.pk),
                                           "context": {"name": "x"}}, "template"),
        ("api/v1/messages/batch", "post"): send_batch,
        ("api/v1/notifications/email", "post"): send({
            "template_id": str(version.template_id),
            "recipients": {"type": "list", "list_id": a.contact_list.pk}},
            "recipients" if team_key else "list_id"),
        ("api/v1/schedules", "post"): new_schedule,
        ("api/v1/schedules/cancel", "post"): cancel_by_key,
        ("api/v1/suppressions", "post"): suppress_again,
        ("api/v1/keys", "post"): new_key,
        ("api/v1/team-members", "post"): team_member,
        ("api/v1/oauth-clients", "post"): new_oauth_client,
        ("api/v1/topics", "post"): created_own("/api/v1/topics", {"name": a.topic.name}, Topic, a.topic.name),
        ("api/v1/webhooks", "post"): own_webhook,
    }


def _assert_a_untouched(a: Objects) -> None:
    assert Service.objects.get(pk=a.template.client_id).retention == {}
    template = Template.objects.get(pk=a.template.pk)
    assert template.is_active and template.current_version.version == 1
    contact = Contact.objects.get(pk=a.contact.pk)
    assert contact.name == SECRET and list(contact.lists.all()) == [a.contact_list]
    assert Campaign.objects.get(pk=a.campaign.pk).status == Campaign.Status.SENDING
    assert Schedule.objects.get(pk=a.schedule.pk).status == Schedule.Status.ACTIVE
    assert EmailMessage.objects.get(pk=a.message.pk).status == EmailMessage.Status.SCHEDULED
    assert Suppression.objects.get(pk=a.suppression.pk).client_id == a.template.client_id
    assert not EmailMessage.objects.filter(recipient="b@b.example").exists()  # no test send
    assert not ApiKey.objects.get(pk=a.api_key.pk).revoked
    assert TeamMember.objects.filter(pk=a.team_member.pk).exists()
    assert OAuthClient.objects.filter(pk=a.oauth_client.pk).exists()
    topic = Topic.objects.get(pk=a.topic.pk)
    assert (topic.description, topic.archived_at) == (SECRET, None)
    assert contact.subscribed and not ConsentChange.objects.filter(email=contact.email).exists()
    assert not Suppression.objects.filter(email=contact.email).exists()
    webhook = WebhookEndpoint.objects.get(pk=a.webhook.pk)
    assert (webhook.event_types, webhook.secret, webhook.enabled) == (
        a.webhook.event_types, a.webhook.secret, True)


@pytest.fixture
def tenants(db) -> tuple[Objects, Tenant, Tenant]:
    a = _objects_of(_tenant(f"{SECRET}-service").client)
    b = _tenant("client-b", scopes=["send", "campaigns", "schedules", "analytics", "keys"])
    admin = _tenant("operator", scopes=["admin"])
    return a, b, admin


def _bearer_api(service: Service) -> APIClient:
    """An API client calling with an OAuth2 token of `service` (client credentials)."""
    client, secret = oauth_client_create(service=service, name="walker")
    basic = base64.b64encode(f"{client.client_id}:{secret}".encode()).decode()
    response = APIClient().post("/oauth/token", {"grant_type": "client_credentials"},
                                HTTP_AUTHORIZATION=f"Basic {basic}")
    assert response.status_code == 200, response.content
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['access_token']}")
    return api


def _with_credential(b: Tenant, kind: str) -> Tenant:
    """B calling with another of its credentials: every kind sees B's rows, never A's."""
    if kind == "first key":
        return b
    if kind == "oauth token":
        return Tenant(b.client, _bearer_api(b.client))
    key_type = {"second key": "live", "test key": "test", "team key": "team"}[kind]
    _, key = api_key_create(service=b.client, name=kind, key_type=key_type,
                            scopes=["send", "campaigns", "schedules", "analytics", "keys"])
    # The walk's own sends go to b@b.example and x@b.example: B's team.
    for email in ("b@b.example", "x@b.example"):
        TeamMember.objects.get_or_create(service=b.client, email=email)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return Tenant(b.client, api)


@pytest.mark.parametrize("kind", ["first key", "second key", "test key", "team key", "oauth token"])
def test_every_route_hides_a_clients_objects_from_another(tenants, kind):
    a, b, admin = tenants
    b = _with_credential(b, kind)
    collection = _collection_checks(a, b, kind)
    walked = []
    for route, pattern in _routes(get_resolver().url_patterns):
        if route in NOT_TENANT_DATA:
            continue
        methods = _methods(pattern)
        assert methods, f"{route}: not an API view; classify it in NOT_TENANT_DATA or here"
        walked += [(route, method) for method in methods]
    # Reads first: B's own writes below reuse A's names (names are unique per client only).
    for route, method in sorted(walked, key=lambda item: item[1] != "get"):
        if route in OBJECT_ROUTES:
            url = _url(route, OBJECT_ROUTES[route](a))
            body = BODIES.get((route, method), lambda _: {})(a)
            response = _call(b.api, method, url, body)
            assert response.status_code == 404, (method, url, response.status_code, response.content)
            if method == "get":  # the id is real: the admin scope sees it
                assert _call(admin.api, method, url, body).status_code == 200, (url, body)
        elif method == "get":
            assert "<" not in route, f"/{route}: the tenancy walk cannot fill it; add it to OBJECT_ROUTES"
            response = b.api.get("/" + route)
            assert response.status_code == 200, (route, response.content)
            assert SECRET not in response.content.decode(), (route, response.content)
        else:
            check = collection.get((route, method))
            assert check, f"{method.upper()} /{route}: the tenancy walk does not know this route"
            check()
    _assert_a_untouched(a)
    # Every known route was found in the URL conf (a renamed route cannot leave a stale entry).
    assert set(OBJECT_ROUTES) | {route for route, _ in collection} <= {route for route, _ in walked}
    assert set(collection) <= set(walked)


def test_the_admin_scope_sees_every_clients_objects(tenants):
    a, b, admin = tenants
    b_version = factories.template_version(client=b.client, name="b-template")
    listed = admin.api.get("/api/v1/templates").json()["results"]
    assert {a.template.pk, b_version.template_id} <= {row["id"] for row in listed}
    assert admin.api.get(f"/api/v1/campaigns/{a.campaign.pk}/stats").status_code == 200
    campaigns = admin.api.get("/api/v1/campaigns").json()["results"]
    assert a.campaign.pk in {row["campaign_id"] for row in campaigns}
    assert a.contact_list.pk in {row["id"] for row in admin.api.get("/api/v1/lists").json()["results"]}


def test_a_send_names_only_the_senders_own_template_list_and_segment(tenants):
    """A foreign id is the same 400 as a missing one, naming the field, and writes nothing."""
    a, b, _ = tenants
    own = factories.template_version(client=b.client, name="b-otp")
    missing_template = b.api.post("/api/v1/messages", {"to": "x@b.example", "template": "999999999",
                                                       "context": {"name": "x"}}, format="json")
    for reference in (str(a.template.pk), a.template.name):
        response = b.api.post("/api/v1/messages", {"to": "x@b.example", "template": reference,
                                                   "context": {"name": "x"}}, format="json")
        assert response.status_code == 400 and set(response.json()) == set(missing_template.json())
        assert "template" in str(response.json())
    campaign = {"template_id": str(own.template_id)}
    for recipients, field in (({"type": "list", "list_id": a.contact_list.pk}, "list_id"),
                              ({"type": "segment", "segment_id": a.segment.pk}, "segment_id")):
        response = b.api.post("/api/v1/notifications/email", {**campaign, "recipients": recipients},
                              format="json")
        assert response.status_code == 400, response.content
        assert field in response.json()["errors"]["recipients"] if "errors" in response.json() \
            else field in str(response.json())
    response = b.api.post("/api/v1/notifications/email", {
        "template_id": str(a.template.pk), "recipients": {"type": "inline", "contacts": [
            {"email": "x@b.example"}]}}, format="json")
    assert response.status_code == 400 and "template_id" in str(response.json())
    assert not EmailMessage.objects.filter(client=b.client).exists()
    assert not Campaign.objects.filter(client=b.client).exists()


def test_a_recurring_schedule_names_only_the_clients_own_template_and_list(tenants):
    """Its definition is checked with the launching client's rules when it is created: another
    client's template or list is a 400 naming it, and no schedule is stored."""
    from scheduling.models import Schedule

    a, b, _ = tenants
    own = factories.template_version(client=b.client, name="b-weekly")
    inline = {"type": "inline", "contacts": [{"email": "x@b.example"}]}
    for definition, field in (({"template_id": str(a.template.pk), "recipients": inline}, "template_id"),
                              ({"template_id": str(own.template_id),
                                "recipients": {"type": "list", "list_id": a.contact_list.pk}}, "list_id")):
        response = b.api.post("/api/v1/schedules", {"name": "weekly", "type": "recurring",
                              "cron": "0 9 * * 1", "definition": definition}, format="json")
        assert response.status_code == 400 and field in str(response.json()["error"]["fields"]), \
            response.content
    assert not Schedule.objects.filter(client=b.client).exists()


def test_a_campaign_reaches_only_its_clients_contacts(tenants):
    """The same address at two clients is two contacts; a segment matching everyone reaches only
    the launching client's, through the (client, id) index."""
    from campaigns.services.fanout import campaign_fanout

    a, b, _ = tenants
    Contact.objects.create(client=b.client, email="bob@b.example")
    Contact.objects.create(client=b.client, email=a.contact.email)  # same address, B's contact
    version = factories.template_version(client=b.client, name="b-news")
    campaign = Campaign.objects.create(
        client=b.client, name="b", template_version=version, status=Campaign.Status.QUEUED,
        audience={"client_id": b.client.pk, "type": "segment", "definition": a.segment.definition})
    campaign_fanout(campaign_id=campaign.pk)
    rows = EmailMessage.objects.filter(campaign=campaign)
    assert sorted(rows.values_list("recipient", flat=True)) == ["ada@a-secret.example", "bob@b.example"]
    assert set(rows.values_list("contact__client", flat=True)) == {b.client.pk}


@pytest.mark.django_db(transaction=True)  # the importer writes from its own thread's connection
def test_import_contacts_writes_the_named_clients_contacts(tmp_path):
    """Each client imports its own copy of an address; without --client nothing is written."""
    from django.core.management import CommandError, call_command

    path = tmp_path / "contacts.csv"
    path.write_text("email,name\nada@example.com,Ada\n")
    first, second = _tenant("importer-one").client, _tenant("importer-two").client
    with pytest.raises(CommandError):
        call_command("import_contacts", str(path), "--client", "nobody")
    for client in (first, second):
        call_command("import_contacts", str(path), "--service", client.api_keys.get().prefix,
                     "--list", "news")
    rows = Contact.objects.filter(email="ada@example.com")
    assert sorted(rows.values_list("client_id", flat=True)) == sorted([first.pk, second.pk])
    assert ContactList.objects.filter(name="news").count() == 2


BEFORE_TENANCY = [("audience", "0002_tables_renamed"), ("templates", "0002_template_locales"),
                  ("campaigns", "0005_audience_models_moved")]


@pytest.mark.django_db(transaction=True)
def test_rows_from_before_tenancy_go_to_the_oldest_client_else_a_placeholder():
    """The migrations' owner: the oldest client, else a revoked placeholder (visible to admin)."""
    from clients.legacy_owner import PLACEHOLDER_NAME, legacy_owner_id

    old = migrate_to(BEFORE_TENANCY)
    clients = old.get_model("clients", "ApiClient")
    clients.objects.all().delete()
    placeholder = clients.objects.get(pk=legacy_owner_id(old))
    assert (placeholder.name, placeholder.revoked) == (PLACEHOLDER_NAME, True)
    clients.objects.all().delete()
    first = clients.objects.create(id="aaaaaaaa.x", prefix="aaaaaaaa", hashed_key="x", name="first")
    clients.objects.create(id="bbbbbbbb.x", prefix="bbbbbbbb", hashed_key="x", name="later")
    assert legacy_owner_id(old) == first.pk
    migrate_to(latest_migrations())


@pytest.mark.django_db(transaction=True)
def test_the_migrations_give_rows_without_an_owner_to_the_oldest_client():
    old = migrate_to(BEFORE_TENANCY)
    clients = old.get_model("clients", "ApiClient")
    first = clients.objects.create(id="aaaaaaaa.x", prefix="aaaaaaaa", hashed_key="x", name="first")
    later = clients.objects.create(id="bbbbbbbb.x", prefix="bbbbbbbb", hashed_key="x", name="later")
    template = old.get_model("templates", "Template").objects.create(name="otp")
    version = old.get_model("templates", "TemplateVersion").objects.create(
        template=template, version=1, subject="s", html_body="b")
    contact = old.get_model("audience", "Contact").objects.create(email="ada@example.com")
    members = old.get_model("audience", "ContactList").objects.create(name="news")
    segment = old.get_model("audience", "Segment").objects.create(name="all", definition={})
    campaign = old.get_model("campaigns", "Campaign")
    theirs = campaign.objects.create(name="c", client_id=later.pk, template_version=version,
                                     audience={"type": "list", "list_id": members.pk})
    orphan = campaign.objects.create(name="o", template_version=version,
                                     audience={"type": "list", "list_id": members.pk})

    latest = migrate_to(latest_migrations())

    # Each client became a service of the same id holding that client's row as its key.
    assert {s.pk: s.name for s in latest.get_model("clients", "Service").objects.all()} == {
        first.pk: "first", later.pk: "later"}
    assert {k.pk: k.service_id for k in latest.get_model("clients", "ApiKey").objects.all()} == {
        first.pk: first.pk, later.pk: later.pk}
    for model, pk in (("templates.Template", template.pk), ("audience.Contact", contact.pk),
                      ("audience.ContactList", members.pk), ("audience.Segment", segment.pk)):
        assert latest.get_model(model).objects.get(pk=pk).client_id == first.pk, model
    campaigns = latest.get_model("campaigns", "Campaign").objects
    assert campaigns.get(pk=theirs.pk).audience["client_id"] == later.pk
    assert campaigns.get(pk=orphan.pk).audience["client_id"] == first.pk
