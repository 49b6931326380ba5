"""send_demo_campaign as an operator runs it (a real manage.py process): its bar counts against
the whole audience, cancelled recipients are not done, and a FAILED campaign exits non-zero; in a
terminal (a pseudo-terminal here) the bar is one line redrawn in place, elsewhere a few plain
lines, and the summary is words."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest
from django.utils import timezone

from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from campaigns.services.lifecycle import campaign_complete, campaign_fail
from clients.services import service_create
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


ARGV = [sys.executable, "manage.py", "send_demo_campaign", "--recipients", "20", "--timeout", "60"]


def _last_bar(stderr: str) -> tuple[int, int]:
    """(done, total) of the bar's last line."""
    done, total = re.findall(r"sending: +\d+% (\d[\d,]*)/(\d[\d,]*) msg", stderr)[-1]
    return int(done.replace(",", "")), int(total.replace(",", ""))


@pytest.fixture
def demo_client(transactional_db, purged_queues):
    service_create(name="demo")  # what `make run` creates: the command's default --client
    yield
    celery_app.control.purge()  # the sends nobody consumed here


@pytest.fixture
def command(demo_client):
    process = subprocess.Popen(ARGV, cwd=processes.BASE_DIR, env=processes.subprocess_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield process
    if process.poll() is None:
        process.kill()
        process.communicate()


class Terminal:
    """The command with stdout and stderr on a pseudo-terminal, as in an operator's shell."""

    def __init__(self, columns: int) -> None:
        master, slave = pty.openpty()
        if columns:  # else the size is 0 x 0, as under `script` run without a terminal
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        self.process = subprocess.Popen(ARGV, cwd=processes.BASE_DIR, env=processes.subprocess_env(),
                                        stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.master, self.chunks = master, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the last holder of the terminal closed it
                return
            if not chunk:
                return
            self.chunks.append(chunk)

    def output(self, timeout: float = 60) -> str:
        """Everything shown, once the command ended; the terminal's CR LF read back as LF."""
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        os.close(self.master)
        return b"".join(self.chunks).decode(errors="replace").replace("\r\n", "\n")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _play_the_send(campaign: Campaign, steps: int = 4) -> None:
    """No worker runs here: the test plays the fan-out (real code) and the workers' sends, a few
    rows at a time, slower than the command's poll, so the bar has something to redraw."""
    campaign_fanout(campaign_id=campaign.pk)
    ids = list(EmailMessage.objects.filter(campaign=campaign).order_by("id").values_list("id", flat=True))
    size = len(ids) // steps
    for step in range(steps):
        time.sleep(1.2)
        chunk = ids[step * size:] if step == steps - 1 else ids[step * size:(step + 1) * size]
        EmailMessage.objects.filter(id__in=chunk).update(status=MS.SENT, sent_at=timezone.now())
    assert campaign_complete(campaign_id=campaign.pk)


@pytest.mark.parametrize("columns", [120, 0], ids=["sized", "unsized"])
def test_in_a_terminal_the_bar_is_one_line_redrawn_in_place_and_the_summary_is_words(demo_client, columns):
    terminal = Terminal(columns)
    try:
        campaign = _launched("demo to 20", terminal.process)
        _play_the_send(campaign)
        shown = terminal.output()
    finally:
        terminal.kill()
    assert terminal.process.returncode == 0, shown
    assert "\x1b[" not in shown, shown  # no colour, no cursor movement: Django's red stderr is gone
    bar_lines = [line for line in shown.split("\n") if "sending:" in line]
    assert len(bar_lines) == 1, shown  # every update redrawn on the same line...
    redraws = bar_lines[0].split("\r")
    assert len([r for r in redraws if "sending:" in r]) >= 4, shown  # ...and there were several
    assert "20/20" in redraws[-1], shown
    lines = shown.strip().split("\n")
    assert lines[-1] == f"campaign {campaign.pk} completed: 20 recipients, 20 sent", shown


def test_elsewhere_the_bar_is_a_few_plain_lines(command):
    campaign = _launched("demo to 20", command)
    _play_the_send(campaign)
    stdout, stderr = command.communicate(timeout=60)
    assert command.returncode == 0, stderr
    assert "\r" not in stderr and "\x1b[" not in stderr, stderr
    bar_lines = stderr.splitlines()
    # The first figures and the last (a plain line is written every 10 s: the run takes ~5 s).
    assert 2 <= len(bar_lines) <= 3 and all(line.startswith("sending: ") for line in bar_lines), stderr
    assert _last_bar(stderr) == (20, 20)
    assert stdout.splitlines()[-1] == f"campaign {campaign.pk} completed: 20 recipients, 20 sent"


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
