"""What the batch APIs' substitution needs to know of an email (SendGrid substitutions, Mailgun
recipient-variables): where a marker the ESP would expand could hide, and whether the email can
travel as its slot template's shared body plus its own values (templates/slots.py)."""

from __future__ import annotations

from collections.abc import Iterable

from delivery.providers.base import OutgoingEmail
from templates.slots import SlotTemplate


def content_holds(email: OutgoingEmail, markers: Iterable[str]) -> bool:
    """Whether a marker appears in what the ESP substitutes in: subject, bodies, headers."""
    parts = (email.subject, email.text, email.html, *email.headers.values())
    return any(marker in part for marker in markers for part in parts)


def substitutable_template(
    email: OutgoingEmail, marker: str | None = None, *, empty_values: bool = True
) -> SlotTemplate | None:
    """The email's slot template, or None when it must travel with literal content: rendered in
    full, or `marker` (default: the template's own nonce) in its subject, a slot value or a
    header (the ESP could expand it there), or an empty value where `empty_values` is False."""
    fill = email.fill
    if fill is None:
        return None
    marker = fill.template.nonce if marker is None else marker
    values = (*fill.html, *fill.text, email.subject, *email.headers.values())
    if any(marker in value for value in values):
        return None
    if not empty_values and not (all(fill.html) and all(fill.text)):
        return None
    return fill.template
