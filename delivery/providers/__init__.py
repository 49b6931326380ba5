"""Providers: one package per ESP (smtp: a module) behind the contract in base.py, in `ESPS`.

`get_provider(name)` returns this thread's instance (built once per thread, so connections are
reused): a provider holds a live connection (an SMTP session, an HTTP pool) that two threads of a
`threads` pool must never interleave on. A prefork child has one thread, so one instance.
Only modules in this package import boto3 or requests.
"""

from __future__ import annotations

import threading

from django.conf import settings

from delivery.providers import mailgun, sendgrid, ses, smtp
from delivery.providers.base import Esp, Provider

# The registry: one line per ESP. Each ESP is a package here holding all of it (its send wire
# format, its webhook's verification and normalisation; see ses/__init__.py) or, for plain SMTP,
# a module. feedback serves /webhooks/<name>/ for every ESP with a webhook.
ESPS: dict[str, Esp] = {esp.name: esp for esp in (smtp.ESP, ses.ESP, sendgrid.ESP, mailgun.ESP)}


def esps_with_webhooks() -> dict[str, Esp]:
    return {name: esp for name, esp in ESPS.items() if esp.webhook_module is not None}


class _PerThreadProviders:
    """Providers built once per thread; `cache_clear()` makes every thread build anew (settings
    changed), as functools.cache's did for the one process-wide instance."""

    def __init__(self) -> None:
        self._local = threading.local()  # .built: (the generation it was built in, name -> provider)
        self._generation = 0

    def __call__(self, name: str) -> Provider:
        generation, built = getattr(self._local, "built", (None, {}))
        if generation != self._generation:
            built = {}
            self._local.built = (self._generation, built)
        provider = built.get(name)
        if provider is None:
            try:
                esp = ESPS[name]
            except KeyError:
                raise ValueError(f"unknown provider {name!r} in NOTIFIER_PROVIDERS") from None
            provider = built[name] = esp.build_provider()
        return provider

    def cache_clear(self) -> None:
        self._generation += 1


get_provider = _PerThreadProviders()


def provider_order() -> list[str]:
    """Failover order, from NOTIFIER_PROVIDERS."""
    return list(settings.NOTIFIER_PROVIDERS)
