"""`make run`'s process manager (devtools/procs.py, honcho underneath) tells what happened in words:
a process asked to stop is "stopped", not "stopped (rc=-15)"; one that ends by itself says how,
and takes the others down. Real honcho, real processes, real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from testkit.processes import BASE_DIR
from testkit.waiting import wait_for

SLEEPER = f"{sys.executable} -c 'import time; time.sleep(60)'"


def _start(procfile: Path) -> tuple[subprocess.Popen, Path]:
    log = procfile.with_suffix(".log")
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "devtools.procs", "--procfile", str(procfile)],
                                   cwd=BASE_DIR, stdout=out, stderr=subprocess.STDOUT)
    return process, log


def _said(log: Path) -> list[str]:
    """Each line as "name | text": honcho's time cut off, its padding squeezed."""
    return [" ".join(line.split()[1:]) for line in log.read_text().splitlines()]


def test_ctrl_c_stops_every_process_and_says_stopped(tmp_path: Path) -> None:
    procfile = tmp_path / "Procfile"
    procfile.write_text(f"web: {SLEEPER}\nworker: exec {SLEEPER}\n")
    process, log = _start(procfile)
    try:
        assert wait_for(lambda: log.read_text().count(" started (pid=") == 2, timeout=30), log.read_text()
        time.sleep(0.5)  # the children are running their sleep, not still starting Python
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    finally:
        process.kill()
    text = log.read_text()
    assert "rc=" not in text and "sending SIGTERM" not in text, text
    said = _said(log)
    assert "system | SIGINT received: stopping every process" in said, text
    assert "system | web.1 stopped" in said and "system | worker.1 stopped" in said, text


def test_a_process_that_ends_by_itself_says_how_and_stops_the_others(tmp_path: Path) -> None:
    procfile = tmp_path / "Procfile"
    procfile.write_text(f"web: {SLEEPER}\nbroken: sleep 1; exit 3\n")
    process, log = _start(procfile)
    try:
        process.wait(timeout=30)
    finally:
        process.kill()
    said = _said(log)
    assert "system | broken.1 exited with status 3: stopping every process" in said, log.read_text()
    assert "system | web.1 stopped" in said, log.read_text()
    assert process.returncode == 3  # honcho's: the first process's status
