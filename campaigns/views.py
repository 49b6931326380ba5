"""The one-click unsubscribe endpoint (RFC 8058), outside the API (no key: the link is the proof).

GET shows a confirmation page with a button and changes nothing: link scanners and prefetchers
follow GETs. POST (the button, or the mailbox provider's one-click POST with the body
`List-Unsubscribe=One-Click`) unsubscribes at once; repeating it is harmless.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils.html import escape
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from audience.models import Contact
from campaigns.services.unsubscribe import contact_unsubscribe, unsubscribe_token_read

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Unsubscribe</title></head>
<body style="font-family:sans-serif;max-width:32em;margin:3em auto">{body}</body></html>"""


def _page(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(_PAGE.format(body=body), status=status, content_type="text/html; charset=utf-8")


@csrf_exempt  # RFC 8058 POSTs come from mailbox providers, never with our CSRF token
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    target = unsubscribe_token_read(token)
    contact = Contact.objects.filter(pk=target.contact_id).first() if target else None
    if contact is None:
        return _page("<p>This unsubscribe link is not valid.</p>", status=404)
    if request.method == "POST":
        done = contact_unsubscribe(contact=contact, campaign_id=target.campaign_id)
        what = f"“{escape(done.topic.name)}” emails" if done.topic else "these emails"
        return _page(f"<p>{escape(contact.email)} is unsubscribed. You will get no more {what}.</p>")
    return _page(
        f"<p>Unsubscribe {escape(contact.email)} from these emails?</p>"
        '<form method="post"><button type="submit">Unsubscribe</button></form>'
    )
