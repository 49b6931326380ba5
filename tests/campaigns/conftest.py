"""Fixtures the campaign tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.scheduling.support import clear_schedule_keys


@pytest.fixture
def clean_due_set() -> Iterator[None]:
    """The scheduler's Redis keys empty before and after the test (schedules write the due set)."""
    clear_schedule_keys()
    yield
    clear_schedule_keys()
