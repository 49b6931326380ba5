"""What broadcast mail carries for its recipient, on the send path: the one-click unsubscribe
headers and the preference link (`{{ preferences_url }}`, and the footer the platform adds).
Registered with delivery in consent/apps.py; called once per message, so each is a few string
operations and one prepared HMAC copy per link (bench/render_slots.py, decision 108)."""

from __future__ import annotations

from functools import lru_cache

from django.utils import translation
from django.utils.html import escape
from django.utils.translation import gettext

from audience.models import Stream
from consent.selectors import SOURCE_LANGUAGE, supported_language
from consent.tokens import address_unsubscribe_token, preferences_url, unsubscribe_token, unsubscribe_url
from delivery.extensions import RenderAddition, SendableMessage
from templates.models import TemplateVersion
from templates.rendering import Footer

PREFERENCES_VARIABLE = "preferences_url"
ONE_CLICK = "List-Unsubscribe=One-Click"


def one_click_headers(message: SendableMessage) -> dict[str, str]:
    """RFC 8058 headers for broadcast mail; none for transactional mail.

    `List-Unsubscribe` with an HTTPS URI signed per recipient and `List-Unsubscribe-Post:
    List-Unsubscribe=One-Click`, which tells the mailbox provider to POST that body to the URI
    (Gmail and Yahoo require both for bulk senders since 2024). A campaign row of a contact names
    the contact and the campaign (the links sent before issue 28 have that form); any other
    broadcast message names its service, its topic and its address."""
    if message.campaign_id and message.contact_id:
        token = unsubscribe_token(contact_id=message.contact_id, campaign_id=message.campaign_id)
    elif message.stream == Stream.BROADCAST and message.client_id:
        token = address_unsubscribe_token(service_id=message.client_id, email=message.recipient.lower(),
                                          topic_id=message.topic_id, campaign_id=message.campaign_id)
    else:
        return {}
    return {"List-Unsubscribe": f"<{unsubscribe_url(token)}>", "List-Unsubscribe-Post": ONE_CLICK}


def preference_link(message: SendableMessage, variant: TemplateVersion) -> RenderAddition | None:
    """`preferences_url` for a broadcast message, or any message whose template names it, and
    the platform's footer with it in broadcast mail whose template does not show it itself.
    Transactional mail that does not name it gets nothing (no signing on the OTP path)."""
    names_it = PREFERENCES_VARIABLE in variant.required_variables
    if not names_it and message.stream != Stream.BROADCAST:
        return None
    url = preferences_url(service_id=message.client_id, email=message.recipient.lower()) \
        if message.client_id else ""
    if names_it:
        return RenderAddition({PREFERENCES_VARIABLE: url})
    return RenderAddition({PREFERENCES_VARIABLE: url}, preferences_footer(variant.locale) if url else None)


@lru_cache(maxsize=64)
def preferences_footer(locale: str) -> Footer:
    """The footer in the template locale's language where the pages have it, else English."""
    with translation.override(supported_language(locale) or SOURCE_LANGUAGE):
        label = gettext("Manage your email preferences or unsubscribe")
    return Footer(
        variable=PREFERENCES_VARIABLE,
        html_head='<p style="margin:24px 0 0;font-size:12px;line-height:1.5;color:#6b7280;'
                  'text-align:center"><a href="',
        html_tail=f'" style="color:#6b7280">{escape(label)}</a></p>',
        text_head=f"\n\n{label}: ",
        text_tail="\n",
    )
