"""send_demo_campaign as an operator runs it (a real manage.py process): its bar counts against
the whole audience, cancelled recipients are not done, and a FAILED campaign exits non-zero."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from django.utils import timezone

from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from campaigns.services.lifecycle import campaign_fail
from clients.services import api_client_create
from delivery.models import EmailMessage
from notifier.celery import app as celery_app
from testkit import processes

MS = EmailMessage.Status


def _launched(name: str, command: subprocess.Popen, timeout: float = 60) -> Campaign:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        campaign = Campaign.objects.filter(name=name).first()
        if campaign:
            return campaign
        assert command.poll() is None, command.communicate()
        time.sleep(0.2)
    raise TimeoutError(f"{name!r} was not launched")


def _last_bar(stderr: str) -> tuple[int, int]:
    """(done, total) of the bar's last redraw (text mode reads its carriage returns as newlines)."""
    done, total = re.findall(r"sending \[[#-]+\] +[\d.]+% (\d[\d,]*)/(\d[\d,]*)", stderr)[-1]
    return int(done.replace(",", "")), int(total.replace(",", ""))


@pytest.fixture
def command(transactional_db, purged_queues):
    api_client_create(name="demo")  # what `make run` creates: the command's default --client
    argv = [sys.executable, "manage.py", "send_demo_campaign", "--recipients", "20", "--timeout", "60"]
    process = subprocess.Popen(argv, cwd=processes.BASE_DIR, env=processes.subprocess_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield process
    if process.poll() is None:
        process.kill()
        process.communicate()
    celery_app.control.purge()  # the sends nobody consumed here


def test_demo_counts_against_the_audience_and_exits_non_zero_when_the_campaign_fails(command):
    campaign = _launched("demo to 20", command)
    # No worker runs here: the test plays the fan-out (real code) and the send workers' outcomes.
    campaign_fanout(campaign_id=campaign.pk)
    ids = list(EmailMessage.objects.filter(campaign=campaign).order_by("id").values_list("id", flat=True))
    EmailMessage.objects.filter(id__in=ids[:5]).update(status=MS.SENT, sent_at=timezone.now())
    EmailMessage.objects.filter(id__in=ids[5:10]).update(status=MS.CANCELLED)
    campaign_fail(campaign_id=campaign.pk, reason="provider account suspended")
    stdout, stderr = command.communicate(timeout=60)
    assert command.returncode != 0, stdout
    assert f"campaign {campaign.pk} FAILED: provider account suspended" in stderr
    assert _last_bar(stderr) == (5, 20)  # the 5 cancelled recipients are not done
