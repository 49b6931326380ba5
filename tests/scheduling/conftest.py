from __future__ import annotations

import pytest

from tests.scheduling.support import clear_schedule_keys, clear_send_queues


@pytest.fixture(autouse=True)
def clean_redis():
    clear_schedule_keys()
    clear_send_queues()
    yield
    clear_schedule_keys()
    clear_send_queues()
