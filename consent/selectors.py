"""Reads for the recipient's pages: what the preference page shows, and in which language."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from audience.models import Contact
from audience.services.consent import ConsentSubject, everywhere_suppression_reason
from audience.topics import TopicState, broadcast_suppressed, topic_states

# The page's and the footer's languages: English (the source strings) and every translation
# shipped in consent/locale/.
SOURCE_LANGUAGE = "en"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"


@dataclass(frozen=True)
class Preferences:
    """A recipient's standing with one service: each live topic and their state in it (their
    choice, else the topic's default), whether they left the whole broadcast stream, and the
    reason of an all-streams suppression (then no mail reaches them at all)."""

    topics: list[TopicState]
    left_broadcast: bool
    blocked_reason: str | None


def preferences_read(subject: ConsentSubject) -> Preferences:
    """What the page shows: the same reads as the service's preferences API (audience.topics)."""
    return Preferences(topic_states(service_id=subject.service_id, email=subject.email),
                       broadcast_suppressed(service_id=subject.service_id, email=subject.email),
                       everywhere_suppression_reason(subject))


@cache
def page_languages() -> frozenset[str]:
    """The languages the recipient's pages speak (lower-case codes, "fr", "pt-br")."""
    found = {path.parent.parent.name.lower().replace("_", "-")
             for path in LOCALE_DIR.glob("*/LC_MESSAGES/django.mo")}
    return frozenset({SOURCE_LANGUAGE, *found})


def supported_language(locale: str) -> str | None:
    """The page language for a locale ("fr-CA" -> "fr-ca", else "fr"), or None."""
    wanted = locale.strip().replace("_", "-").lower()
    for candidate in (wanted, wanted.split("-")[0]):
        if candidate and candidate in page_languages():
            return candidate
    return None


def contact_locale(subject: ConsentSubject) -> str:
    """The locale of the service's contact with this address ("" when none is)."""
    return (Contact.objects.filter(client_id=subject.service_id, email=subject.email)
            .values_list("locale", flat=True).first()) or ""
