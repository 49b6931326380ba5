"""The schema documents every API route, with errors and examples; the docs page needs no CDN."""

from __future__ import annotations

import re

import pytest
from django.urls import get_resolver

pytestmark = pytest.mark.django_db


def _api_routes() -> set[str]:
    routes = set()
    for pattern in get_resolver().url_patterns:
        route = str(pattern.pattern)
        if route.startswith("api/v1/") and not re.search(r"schema|docs|redoc", route):
            routes.add("/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route))
    return routes


def test_every_api_route_is_in_the_schema_with_its_error_responses(client):
    schema = client.get("/api/v1/schema/?format=json").json()
    assert _api_routes() <= set(schema["paths"]), _api_routes() - set(schema["paths"])
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            if any(operation.get("security") or []):
                assert {"401", "403"} <= codes, (method, path, codes)
            assert {"429", "503"} <= codes, (method, path, codes)
            assert operation.get("summary"), (method, path)
            if method in ("post", "put"):
                assert {"400", "413"} <= codes, (method, path, codes)
                # 415 only where a body is read: a body nobody parses cannot have a wrong type.
                assert ("415" in codes) == ("requestBody" in operation), (method, path, codes)
    assert schema["components"]["securitySchemes"]["ApiKey"]["name"] == "Authorization"
    create = schema["paths"]["/api/v1/templates"]["post"]
    assert any(p["name"] == "Idempotency-Key" for p in create["parameters"])
    assert "409" in create["responses"]
    # An error only one view gives is declared by it, in the shared shape (core.api.schema).
    pause = schema["paths"]["/api/v1/campaigns/{campaign_id}/pause"]["post"]["responses"]["409"]
    assert pause["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_docs_pages_render_from_local_assets(client):
    for url in ("/api/v1/docs/", "/api/v1/redoc/"):
        response = client.get(url)
        assert response.status_code == 200
        html = response.content.decode()
        # Swagger UI's assets from the sidecar, Redoc's bundle from our view (core/api/docs.py).
        assert ("drf_spectacular_sidecar" in html or "/api/v1/redoc/redoc.standalone.js" in html)
        assert "cdn.jsdelivr" not in html
        # No absolute URL to another host (a CDN, Google Fonts): everything comes from us.
        assert set(re.findall(r"""https?://([^/"'\s]+)""", html)) <= {"testserver"}, url
    # Redoc's own bundle shows Redocly's logo from its CDN: ours is served without it, and the
    # page's policy would keep anything else off-site from loading
    # (tests/openapi/test_docs_browser.py watches the browser).
    page = client.get("/api/v1/redoc/")
    policy = page["Content-Security-Policy"]
    assert "img-src 'self' data:" in policy and "default-src 'self'" in policy
    bundle_url = re.search(r'<script src="([^"]+)"', page.content.decode()).group(1)
    assert bundle_url.startswith("/api/v1/redoc/redoc.standalone.js?v="), bundle_url
    bundle = client.get(bundle_url)
    assert bundle.status_code == 200 and bundle["Content-Type"].startswith("text/javascript")
    script = bundle.content.decode()
    assert len(script) > 500_000 and 'alt:"redocly logo"' in script  # Redoc's, logo and all
    # The logo was the one image it loads from another host: now none is.
    assert "cdn.redoc.ly" not in script and not re.findall(r"""src:\s*["']https?://""", script)
