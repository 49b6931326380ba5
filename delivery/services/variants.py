"""Pick each message's template variant by its contact's locale, with one query per batch.

Templates can carry locale variants of a version (templates.rendering.choose_variant: exact
locale, then its language, then the default). Transactional messages without a contact, and
contacts without a locale, render the version they pinned. Versions are immutable (a change
publishes a new version), so each is read once per process; the variants of a version are read
once per batch (a variant can be added to a published version).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Q

from templates.models import TemplateVersion
from templates.rendering import choose_variant

# (version id, locale) -> the row to render.
Variants = dict[tuple[int, str], TemplateVersion]

_versions: dict[int, TemplateVersion] = {}
_VERSIONS_MAX = 512


def template_version_cached(version_id: int) -> TemplateVersion:
    """The version row, read once per process."""
    version = _versions.get(version_id)
    if version is None:
        if len(_versions) >= _VERSIONS_MAX:
            _versions.clear()
        version = _versions[version_id] = TemplateVersion.objects.get(pk=version_id)
    return version


def variants_for_batch(wanted: Iterable[tuple[int, str]]) -> Variants:
    """The variant to render for each (version id, contact locale) a batch needs: one query
    for the locale variants of the versions localised messages use."""
    pairs = set(wanted)
    versions = {version_id: template_version_cached(version_id) for version_id, _ in pairs}
    localised = {(versions[v].template_id, versions[v].version) for v, locale in pairs if locale}
    index: dict[tuple[int, int], list[TemplateVersion]] = defaultdict(list)
    if localised:
        condition = Q()
        for template_id, number in localised:
            condition |= Q(template_id=template_id, version=number)
        for variant in TemplateVersion.objects.filter(condition).order_by("locale"):
            index[(variant.template_id, variant.version)].append(variant)
    return {(v, locale): _variant(versions[v], locale, index) for v, locale in pairs}


def _variant(version: TemplateVersion, locale: str,
             index: dict[tuple[int, int], list[TemplateVersion]]) -> TemplateVersion:
    variants = index.get((version.template_id, version.version))
    return choose_variant(variants, locale) if locale and variants else version
