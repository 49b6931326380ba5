"""The API's Redoc page, served with no request to another host (no CDN, no web fonts).

drf-spectacular-sidecar serves the Redoc bundle from our static files, but drf-spectacular's
template still loads Google Fonts, and the bundle itself shows Redocly's logo from
cdn.redoc.ly (unconditionally, no Redoc option turns it off). Our template drops the fonts;
this Content-Security-Policy stops the browser from fetching anything else off-site: the logo
is never requested and Redoc hides it when it fails to load.
"""

from __future__ import annotations

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


class LocalRedocView(SpectacularRedocView):
    template_name = "core/redoc.html"

    @extend_schema(exclude=True)  # a docs page, not an API operation (as in the parent view)
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = REDOC_CSP
        return response
