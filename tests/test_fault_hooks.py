"""Fault injection lives in tests/faults/, connected to the product's signals only by the test
settings: production settings define no NOTIFIER_FAULT_* setting, and a process running them
ignores the variables (docs/decisions.md 39)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import notifier.settings as production
import tests.fault_settings as fault_settings
from delivery.models import EmailMessage
from testkit import processes
from tests.factories import email_message, template_version

CRASH = "poison@x.example"
CHILD = (
    "import django, sys, uuid; django.setup()\n"
    "from delivery import signals\n"
    "from delivery.services.sending import message_batch_send\n"
    "print('receivers', len(signals.batch_claimed.receivers), len(signals.message_rendering.receivers))\n"
    "report = message_batch_send(message_ids=[int(sys.argv[1])], token=uuid.uuid4().hex)\n"
    "sys.exit(0 if report.sent == 1 else 1)\n"
)


def test_production_settings_define_no_fault_setting_and_no_fault_app():
    assert [name for name in dir(production) if name.startswith("NOTIFIER_FAULT")] == []
    assert not any(app.startswith("tests") for app in production.INSTALLED_APPS)
    assert [*production.INSTALLED_APPS, "tests.faults"] == fault_settings.INSTALLED_APPS


def test_no_production_module_reads_a_fault_variable():
    root = Path(processes.BASE_DIR)
    skip = {"tests", "testkit", "bench", ".venv", ".git", "node_modules"}
    readers = [
        str(path.relative_to(root)) for path in root.rglob("*.py")
        if not skip & set(path.relative_to(root).parts) and "NOTIFIER_FAULT" in path.read_text()
    ]
    assert readers == []


def _send_in_child(message_id: int, settings_module: str, smtp_port: int) -> subprocess.CompletedProcess:
    env = processes.subprocess_env(
        SMTP_HOST="127.0.0.1", SMTP_PORT=str(smtp_port), NOTIFIER_PROVIDERS="smtp",
        NOTIFIER_FAULT_CRASH_RECIPIENT=CRASH, NOTIFIER_FAULT_PAUSE_AFTER_CLAIM="0.1",
        DJANGO_SETTINGS_MODULE=settings_module,
    )
    return subprocess.run([sys.executable, "-c", CHILD, str(message_id)], env=env, cwd=processes.BASE_DIR,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.django_db(transaction=True)
def test_a_worker_on_production_settings_ignores_the_fault_variables(smtp_server):
    version = template_version()
    with_faults, production_only = (email_message(version=version, recipient=CRASH, priority=2)
                                    for _ in range(2))

    crashed = _send_in_child(with_faults.id, "tests.fault_settings", smtp_server.port)
    assert crashed.returncode == 70, crashed.stderr  # the hooks work when the test app connects them
    assert "receivers 1 2" in crashed.stdout

    sent = _send_in_child(production_only.id, "notifier.settings", smtp_server.port)
    assert sent.returncode == 0, sent.stderr
    assert "receivers 0 0" in sent.stdout
    assert EmailMessage.objects.get(id=production_only.id).status == EmailMessage.Status.SENT
    assert smtp_server.handler.ids() == [str(production_only.id)]
