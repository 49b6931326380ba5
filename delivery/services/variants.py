"""Pick each message's template variant by its contact's locale, with one query per batch.

Templates can carry locale variants of a version (templates.rendering.choose_variant: exact
locale, then its language, then the default). Transactional messages without a contact, and
contacts without a locale, render the version they pinned.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django.db.models import Q

from delivery.models import EmailMessage
from templates.models import TemplateVersion
from templates.rendering import choose_variant

VariantIndex = dict[tuple[int, int], list[TemplateVersion]]


def _locale(message: EmailMessage) -> str:
    return message.contact.locale if message.contact_id and message.contact else ""


def variants_for_batch(messages: Sequence[EmailMessage]) -> VariantIndex:
    """Every locale variant of the versions that localised messages of the batch use."""
    wanted = {(m.template_version.template_id, m.template_version.version)
              for m in messages if _locale(m)}
    if not wanted:
        return {}
    condition = Q()
    for template_id, version in wanted:
        condition |= Q(template_id=template_id, version=version)
    index: VariantIndex = defaultdict(list)
    for variant in TemplateVersion.objects.filter(condition).order_by("locale"):
        index[(variant.template_id, variant.version)].append(variant)
    return index


def variant_for_message(message: EmailMessage, index: VariantIndex) -> TemplateVersion:
    version = message.template_version
    locale = _locale(message)
    variants = index.get((version.template_id, version.version))
    return choose_variant(variants, locale) if locale and variants else version
