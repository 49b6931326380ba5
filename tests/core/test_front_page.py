"""GET /: where the ready banner and the admin's "View site" lead; GET /tour/: the README's tour."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from core.front_page import readme_tour

pytestmark = pytest.mark.django_db


def _hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', html)


def test_front_page_links_to_each_part(client, settings):
    settings.FLOWER_URL = "http://flower.example:5555/"
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    links = _hrefs(html)
    for href in ("/api/v1/docs/", "/api/v1/redoc/", "/dashboard/", "/admin/", "/tour/",
                 "http://flower.example:5555/", "/healthz"):
        assert href in links, href
    assert "send no task events" in html  # why Flower lists no OTP tasks


def test_front_page_needs_nothing_from_elsewhere_and_sets_a_strict_policy(client):
    response = client.get("/")
    policy = response["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "style-src 'self'" in policy and "script-src" not in policy
    html = response.content.decode()
    # No script at all, no inline style, and every asset (not link) from this site.
    assert "<script" not in html and "style=" not in html
    assets = re.findall(r'<link[^>]+href="([^"]+)"', html)
    assert assets and all(a.startswith("/") for a in assets)
    for asset in assets:
        assert client.get(asset).status_code == 200, asset


def test_the_admins_view_site_link_leads_to_the_front_page(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw-root-1"))
    admin = client.get("/admin/").content.decode()
    assert 'href="/"' in admin and client.get("/").status_code == 200


def test_tour_page_is_the_readmes_tour(client):
    html = client.get("/tour/").content.decode()
    readme = (Path(settings.BASE_DIR) / "README.md").read_text()
    tour = readme_tour()
    assert tour and tour in readme
    assert "Send an OTP" in tour and "## " not in tour  # the section, not the rest of the README
    assert "make run" in html and "Send an OTP" in html


def test_tour_of_an_installation_without_readme(tmp_path):
    assert readme_tour(tmp_path / "README.md") == ""
