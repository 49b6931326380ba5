"""The API's Redoc page, served with no request to another host (no CDN, no web fonts, no logo).

drf-spectacular-sidecar serves the Redoc bundle from our static files, but drf-spectacular's
template still loads Google Fonts, and the bundle itself shows Redocly's logo from
cdn.redoc.ly (unconditionally, no Redoc option turns it off). Our template drops the fonts; the
page loads the bundle from `redoc_bundle_view`, the sidecar's file with the logo's address
replaced by an inline blank image, so the browser never asks for it (before, the page's policy
blocked the request and the console showed the error). The Content-Security-Policy stays, so
nothing else off-site loads either.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.cache import cache_control
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import etag
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularRedocView
from rest_framework.request import Request
from rest_framework.response import Response

# 'unsafe-inline': drf-spectacular's inline Redoc.init() script and the styles Redoc injects;
# blob: the search worker Redoc starts from a blob URL.
REDOC_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:"
)
REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOCLY_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
# A transparent 1x1 GIF: the sidebar's "API docs by Redocly" credit stays, without the image.
BLANK_IMAGE = b"data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"


@functools.cache
def redoc_bundle() -> bytes:
    """The sidecar's bundle without the logo's off-site address (read once per process, ~1 MB)."""
    source = Path(finders.find(REDOC_BUNDLE)).read_bytes()
    return source.replace(REDOCLY_LOGO, BLANK_IMAGE)


@functools.cache
def redoc_bundle_etag() -> str:
    return hashlib.sha256(redoc_bundle()).hexdigest()[:16]


@cache_control(public=True, max_age=7 * 24 * 3600)
@etag(lambda request: redoc_bundle_etag())
@gzip_page
def redoc_bundle_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(redoc_bundle(), content_type="text/javascript; charset=utf-8")


class LocalRedocView(SpectacularRedocView):
    template_name = "core/redoc.html"

    def _redoc_standalone(self) -> str:
        # The version in the address: a new sidecar release is fetched despite the week's cache.
        return f"{reverse('api-redoc-bundle')}?v={redoc_bundle_etag()}"

    @extend_schema(exclude=True)  # a docs page, not an API operation (as in the parent view)
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = REDOC_CSP
        return response
