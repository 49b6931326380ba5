"""GET /: where the ready banner and the admin's "View site" lead, with a link to each part a
newcomer looks for; GET /tour/: the README's five-minute tour, as the README has it.

No script and no asset from elsewhere: the page's Content-Security-Policy allows its own
stylesheet and favicon only, so it works wherever a stricter site-wide policy applies too.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
TOUR_HEADING = "## A five-minute tour"


@require_GET
def front_page(request: HttpRequest) -> HttpResponse:
    context = {"flower_url": settings.FLOWER_URL, "has_tour": bool(readme_tour())}
    return _with_policy(render(request, "core/front_page.html", context))


@require_GET
def tour_page(request: HttpRequest) -> HttpResponse:
    tour = readme_tour()
    context = {"tour": tour, "flower_url": settings.FLOWER_URL}
    return _with_policy(render(request, "core/tour.html", context, status=200 if tour else 404))


def _with_policy(response: HttpResponse) -> HttpResponse:
    response["Content-Security-Policy"] = CSP
    return response


@cache
def readme_tour(readme: Path | None = None) -> str:
    """The README's tour section (its heading up to the next one), read once per process; empty
    when this installation has no README."""
    path = readme or Path(settings.BASE_DIR) / "README.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    start = text.find(TOUR_HEADING)
    if start < 0:
        return ""
    body = text[start + len(TOUR_HEADING):]
    end = body.find("\n## ")
    return (body if end < 0 else body[:end]).strip("\n")
