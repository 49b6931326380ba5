from __future__ import annotations

from django.apps import AppConfig


class FaultsConfig(AppConfig):
    name = "tests.faults"
    label = "test_faults"

    def ready(self) -> None:
        from tests.faults import receivers

        receivers.connect()
