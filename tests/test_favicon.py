"""Every page's favicon is served (browsers ask for /favicon.ico on their own)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db


def test_favicon_is_served_and_linked_from_our_pages(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    assert b"".join(response.streaming_content).startswith(b"\x00\x00\x01\x00")  # an ICO file
    staff = get_user_model().objects.create_user("ops", password="pw-ops-123", is_staff=True)
    for url in ("/admin/login/", "/api/v1/redoc/"):
        assert '<link rel="icon" href="/favicon.ico">' in client.get(url).content.decode(), url
    client.force_login(staff)
    for url in ("/dashboard/", "/admin/"):
        assert '<link rel="icon" href="/favicon.ico">' in client.get(url).content.decode(), url
