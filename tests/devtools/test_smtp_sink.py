"""The development SMTP sink (devtools/smtp_sink.py, `make run`'s): each message is kept as it came
(.eml, its bodies base64) and, beside it, as a .txt a person can read with `cat`."""

from __future__ import annotations

import smtplib
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path

from testkit.ports import free_port
from testkit.processes import BASE_DIR
from testkit.waiting import wait_for


def _message() -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "notifier@localhost", "ada@example.com", "Ihr Code"
    message.set_content("Hallo Ada,\n\nIhr Code ist 123456. Grüße!\n", cte="base64")
    message.add_alternative("<p>Hallo Ada, Ihr Code ist <b>123456</b>.</p>", subtype="html", cte="base64")
    return message


def test_each_message_gets_a_readable_txt_beside_its_eml(tmp_path: Path) -> None:
    port = free_port()
    sink = subprocess.Popen([sys.executable, "-m", "devtools.smtp_sink", "--port", str(port),
                             "--dir", str(tmp_path)], cwd=BASE_DIR, stdout=subprocess.PIPE, text=True)
    try:
        assert "SMTP sink on" in sink.stdout.readline()
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
            client.send_message(_message())
        assert wait_for(lambda: list(tmp_path.glob("*.eml")), timeout=10)
    finally:
        sink.terminate()
        sink.wait(timeout=10)
    [eml] = tmp_path.glob("*.eml")
    assert "123456" not in eml.read_text()  # the reason for the .txt: base64 bodies
    assert eml.with_suffix(".txt").read_text() == (
        "From: notifier@localhost\nTo: ada@example.com\nSubject: Ihr Code\n\n"
        "Hallo Ada,\n\nIhr Code ist 123456. Grüße!\n"
    )
    assert not list(tmp_path.glob(".*"))  # no partial file left behind
