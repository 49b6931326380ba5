"""Templates CRUD with immutable versions, locale variants and the render preview."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clients.services import service_create
from templates.models import Template, TemplateVersion
from templates.rendering import render_version

pytestmark = pytest.mark.django_db
WELCOME = {
    "name": "welcome",
    "subject": "Welcome {{ name }}",
    "html_body": "<p>Hello {{ name }}, code {{ code }}</p>",
    "variants": {"fr": {"subject": "Bienvenue {{ name }}", "html_body": "<p>Bonjour {{ name }}</p>"},
                 "pt-BR": {"subject": "Oi {{ name }}", "html_body": "<p>Oi {{ name }} {{ code }}</p>"}},
}


@pytest.fixture
def welcome(api) -> dict:
    response = api.post("/api/v1/templates", WELCOME, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_create_returns_the_version_its_variables_and_locales(welcome):
    assert welcome["version"] == 1 and welcome["variables"] == ["code", "name"]
    assert welcome["locales"] == ["fr", "pt-BR"]


def test_put_adds_a_version_and_never_edits_one(api, welcome):
    url = f"/api/v1/templates/{welcome['id']}"
    response = api.put(url, {"subject": "Hi {{ name }}", "html_body": "<p>v2 {{ name }}</p>"}, format="json")
    assert response.status_code == 200 and response.json()["version"] == 2
    assert response.json()["locales"] == []
    first = TemplateVersion.objects.get(template_id=welcome["id"], version=1, locale="")
    assert first.subject == "Welcome {{ name }}"             # version 1 untouched
    assert api.get(url).json()["subject"] == "Hi {{ name }}"
    assert api.get(f"{url}?version=1").json()["subject"] == "Welcome {{ name }}"
    assert api.get(f"{url}?version=9").status_code == 404
    assert api.get(f"{url}?version=x").status_code == 400


def test_list_is_paginated_by_cursor(api):
    for n in range(5):
        api.post("/api/v1/templates", {**WELCOME, "name": f"t{n}", "variants": {}}, format="json")
    page = api.get("/api/v1/templates?page_size=2").json()
    assert [item["name"] for item in page["results"]] == ["t4", "t3"] and page["next"]
    second = APIClient.get(api, page["next"]).json()
    assert [item["name"] for item in second["results"]] == ["t2", "t1"]


def test_delete_deactivates_and_hides_but_keeps_versions(api, welcome):
    url = f"/api/v1/templates/{welcome['id']}"
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404
    assert TemplateVersion.objects.filter(template_id=welcome["id"]).count() == 3
    send = api.post("/api/v1/messages", {"to": "a@example.com", "template": "welcome",
                                         "context": {"name": "A", "code": "1"}}, format="json")
    assert send.status_code == 400 and "template" in send.json()["error"]["fields"]


@pytest.mark.parametrize(("locale", "subject"), [
    ("fr", "Bienvenue Ada"), ("fr-CA", "Bienvenue Ada"), ("pt_BR", "Oi Ada"),
    ("de", "Welcome Ada"), ("", "Welcome Ada"),
])
def test_render_preview_chooses_the_locale_with_fallback(api, welcome, locale, subject):
    response = api.post(f"/api/v1/templates/{welcome['id']}/render",
                        {"context": {"name": "Ada", "code": "42"}, "locale": locale}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["subject"] == subject


def test_render_version_is_the_one_function_the_sender_can_use(welcome):
    version = TemplateVersion.objects.get(template_id=welcome["id"], locale="")
    assert render_version(version, {"name": "Ada", "code": "1"}, locale="fr").subject == "Bienvenue Ada"


def test_render_lists_every_missing_variable(api, welcome):
    response = api.post(f"/api/v1/templates/{welcome['id']}/render", {"context": {}}, format="json")
    assert response.status_code == 400
    assert "code, name" in response.json()["error"]["fields"]["context"][0]


def test_render_escapes_merge_values_in_html(api, welcome):
    response = api.post(f"/api/v1/templates/{welcome['id']}/render",
                        {"context": {"name": "<script>x</script>", "code": "1"}}, format="json")
    assert "&lt;script&gt;" in response.json()["html"] and "<script>" not in response.json()["html"]


@pytest.mark.parametrize("html", ["{% for i in range(10**9) %}x{% endfor %}", "{{ lipsum(10**6) }}",
                                  "{{ ('a\n' * 10000)|indent(20000) }}"])
def test_a_hostile_template_saves_but_its_render_is_stopped(api, html):
    body = {"name": "evil", "subject": "s", "html_body": html}
    created = api.post("/api/v1/templates", body, format="json").json()
    response = api.post(f"/api/v1/templates/{created['id']}/render", {"context": {}}, format="json")
    assert response.status_code == 400 and "stopped" in response.json()["error"]["fields"]["template"][0]


@pytest.mark.parametrize(("change", "field", "text"), [
    ({"html_body": "<p>\n\n{% if %}</p>"}, "template", "html_body line 3"),
    ({"subject": "{{ name"}, "template", "subject line 1"),
    ({"variants": {"fr": {"subject": "x", "html_body": "{{ secret }}"}}}, "template", "secret"),
    ({"variants": {"not a locale": {"subject": "x", "html_body": "y"}}}, "variants", "locale"),
    ({"name": "has space"}, "name", ""),
])
def test_validation_on_save(api, change, field, text):
    response = api.post("/api/v1/templates", {**WELCOME, **change}, format="json")
    assert response.status_code == 400
    messages = " ".join(str(m) for m in response.json()["error"]["fields"][field])
    assert text in messages
    assert not Template.objects.exists()


def test_duplicate_names_are_refused(api, welcome):
    response = api.post("/api/v1/templates", WELCOME, format="json")
    assert response.status_code == 400 and "name" in response.json()["error"]["fields"]


def test_unknown_ids_are_404_even_past_bigint(api):
    for url in ("/api/v1/templates/999999", "/api/v1/templates/99999999999999999999999/render"):
        response = api.get(url) if "render" not in url else api.post(url, {}, format="json")
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_templates_need_the_send_or_campaigns_scope():
    _, key = service_create(name="reports", scopes=["analytics"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    assert client.get("/api/v1/templates").status_code == 403
