"""The recipient's pages, outside the API (no key, no login: the signed link is the proof).

- `u/<token>/`, one-click unsubscribe (RFC 8058): GET shows a confirmation with a button and
  changes nothing (link scanners and prefetchers follow GETs); POST (the button, or the mailbox
  provider's one-click POST with the body `List-Unsubscribe=One-Click`, never with our CSRF
  token) unsubscribes at once; a repeat is harmless.
- `p/<token>/`, the preference page: GET shows the service's topics with the recipient's
  choices and changes nothing; POST (our own form, CSRF-protected) applies them.

A forged, altered or expired link, or one naming a service that is gone, gets one generic page
(same status, same text), so a link reveals nothing about an address it does not sign. The pages
are server-rendered, need no script, load nothing from elsewhere (their Content-Security-Policy
allows their own stylesheet only) and speak the contact's language where they have it.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from audience.models import Contact
from audience.services.consent import ConsentRefusedError, ConsentSubject
from clients.models import Service
from consent.selectors import SOURCE_LANGUAGE, contact_locale, preferences_read, supported_language
from consent.services.preferences import preferences_apply
from consent.services.unsubscribe import address_unsubscribe, contact_unsubscribe
from consent.tokens import (
    AddressTarget,
    ContactTarget,
    preference_token_read,
    preferences_url,
    unsubscribe_token_read,
)

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
INVALID_STATUS = 404


@csrf_exempt  # RFC 8058 POSTs come from mailbox providers, never with our CSRF token
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    target = unsubscribe_token_read(token)
    contact = None
    if isinstance(target, ContactTarget):
        contact = Contact.objects.filter(pk=target.contact_id).first()
        subject = ConsentSubject.of(contact.client_id, contact.email) if contact else None
    elif isinstance(target, AddressTarget) and Service.objects.filter(pk=target.service_id).exists():
        subject = ConsentSubject.of(target.service_id, target.email)
    else:
        subject = None
    if subject is None:
        return _invalid(request)
    language = _language(request, subject, contact.locale if contact else None)
    context = {"email": subject.email, "preferences_url": preferences_url(
        service_id=subject.service_id, email=subject.email)}
    if request.method == "POST":
        done = (contact_unsubscribe(contact=contact, campaign_id=target.campaign_id) if contact
                else address_unsubscribe(target=target))
        return _page(request, "consent/unsubscribed.html", {**context, "topic": done.topic}, language)
    return _page(request, "consent/unsubscribe.html", context, language)


@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest, token: str) -> HttpResponse:
    target = preference_token_read(token)
    service = Service.objects.filter(pk=target.service_id).first() if target else None
    if service is None:
        return _invalid(request)
    subject = ConsentSubject.of(service.pk, target.email)
    language = _language(request, subject)
    shown = preferences_read(subject)
    context = {"email": subject.email, "service": service}
    status = 200
    if request.method == "POST":
        try:
            preferences_apply(subject=subject, shown=_posted_topics(request, shown),
                              subscribed_topic_ids=_ids(request.POST.getlist("topic")),
                              leave_broadcast=request.POST.get("leave_broadcast") == "on")
            context["saved"] = True
        except ConsentRefusedError:
            context["refused"] = True
            status = 409
        shown = preferences_read(subject)
    return _page(request, "consent/preferences.html", {**context, "preferences": shown}, language, status)


def _posted_topics(request: HttpRequest, shown):
    """`shown` narrowed to the topics the submitted form showed (hidden `shown` fields): a topic
    created after the page was loaded is not left by a form that never offered it."""
    offered = _ids(request.POST.getlist("shown"))
    return type(shown)([c for c in shown.topics if c.topic.pk in offered], shown.left_broadcast,
                       shown.blocked_reason)


def _ids(values: list[str]) -> set[int]:
    return {int(v) for v in values if v.isdigit() and len(v) < 19}


def _language(request: HttpRequest, subject: ConsentSubject, locale: str | None = None) -> str:
    """The contact's locale where the pages speak it, else the browser's Accept-Language."""
    locale = contact_locale(subject) if locale is None else locale
    return supported_language(locale) or _accepted_language(request)


def _accepted_language(request: HttpRequest) -> str:
    for code, _ in parse_accept_lang_header(request.headers.get("Accept-Language", "")):
        if code != "*" and (found := supported_language(code)):
            return found
    return SOURCE_LANGUAGE


def _invalid(request: HttpRequest) -> HttpResponse:
    """The one answer to every link we cannot honour: it names nothing it was given."""
    return _page(request, "consent/invalid.html", {}, _accepted_language(request), INVALID_STATUS)


def _page(request: HttpRequest, template: str, context: dict, language: str,
          status: int = 200) -> HttpResponse:
    with translation.override(language):
        response = render(request, template, {**context, "language": language}, status=status)
    response["Content-Security-Policy"] = CSP
    response["Content-Language"] = language
    # The link is the credential: never sent to another site. Not "no-referrer": Chromium then
    # sends `Origin: null` with our own form's POST, which the CSRF check refuses.
    response["Referrer-Policy"] = "same-origin"
    response["Cache-Control"] = "no-store"
    response["X-Robots-Tag"] = "noindex"
    return response
