"""`python -m devtools.procs [--colour] [--procfile FILE]`: every Procfile process under honcho.

honcho's own `start`, with its manager and environment handling, but a printer that says what
happened in words: a process asked to stop that did is "stopped", not "stopped (rc=-15)"; one
that ended by itself says how ("exited with status 1", "killed by SIGKILL"), and the ten
"sending SIGTERM to ..." lines are one "stopping every process". devtools/run.py starts it.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from pathlib import Path
from typing import TextIO

import honcho.manager
from honcho.environ import expand_processes, parse_procfile
from honcho.manager import Manager
from honcho.printer import Message, Printer

BASE_DIR = Path(__file__).resolve().parent.parent
SYSTEM = "system"  # the name honcho gives its own lines
# What a process asked to stop ends with: done (0), or the signal honcho or the terminal sent
# (negative: killed by it; 128 + n: a shell reporting it).
_ASKED = {signal.SIGTERM, signal.SIGINT}
STOP_CODES = {0} | {-s for s in _ASKED} | {128 + s for s in _ASKED}

# honcho SIGKILLs whatever still runs 5 s after its SIGTERM: on a busy laptop a worker's warm
# shutdown (finish the running sends, put prefetched tasks back: docs/operations.md) takes
# longer, and a SIGKILL mid-send leaves AMBIGUOUS rows. The launcher waits 30 s for honcho.
KILL_WAIT_SECONDS = 20

_STOPPED = re.compile(r"^(?P<name>\S+) stopped \(rc=(?P<rc>-?\d+)\)$")
_SENDING = re.compile(r"^sending (?P<signal>SIG\w+) to (?P<name>\S+) \(pid \d+\)$")
_RECEIVED = re.compile(r"^(?P<signal>SIG\w+) received$")


def how_it_ended(returncode: int, *, asked_to_stop: bool) -> str:
    """The words for a process's end: "stopped" when it did what it was asked."""
    if asked_to_stop and returncode in STOP_CODES:
        return "stopped"
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


class WordedPrinter(Printer):
    """honcho's printer, with its own lines (name "system") put in words; process output as is."""

    def __init__(self, output: TextIO, *, colour: bool) -> None:
        super().__init__(output)
        self._colours_supported = colour  # our stdout is the launcher's pipe, not the terminal
        self.stopping = False
        self.killed: set[str] = set()  # honcho repeats its SIGKILL every 0.1 s until they are gone

    def write(self, message: Message) -> None:
        if message.name != SYSTEM:
            super().write(message)
            return
        text = self.reword(str(message.data).strip())
        if text:
            super().write(message._replace(data=text + "\n"))

    def reword(self, text: str) -> str:
        """The new text of one of honcho's lines ("" drops it)."""
        if match := _RECEIVED.match(text):
            first, self.stopping = not self.stopping, True
            return f"{match['signal']} received: stopping every process" if first else ""
        if match := _SENDING.match(text):
            if match["signal"] == "SIGKILL":
                if match["name"] in self.killed:
                    return ""
                self.killed.add(match["name"])
                return f"{match['name']} did not stop within {KILL_WAIT_SECONDS} s: sending SIGKILL"
            self.stopping = True
            return ""  # each process's own "stopped" line follows
        if match := _STOPPED.match(text):
            ended = how_it_ended(int(match["rc"]), asked_to_stop=self.stopping)
            if not self.stopping:  # the first to end by itself takes the others down
                self.stopping = True
                return f"{match['name']} {ended}: stopping every process"
            return f"{match['name']} {ended}"
        return text


def manager_for(procfile: Path, *, output: TextIO, colour: bool) -> Manager:
    """Every process of the Procfile, with `PORT` as honcho's `start -p $PORT` gives it."""
    manager = Manager(WordedPrinter(output, colour=colour))
    processes = parse_procfile(procfile.read_text()).processes
    for process in expand_processes(processes, port=int(os.environ.get("PORT", "5000"))):
        manager.add_process(process.name, process.cmd, env={**os.environ, **process.env})
    return manager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--colour", action="store_true", help="colour each process's prefix")
    parser.add_argument("--procfile", type=Path, default=BASE_DIR / "Procfile")
    args = parser.parse_args()
    manager = manager_for(args.procfile, output=sys.stdout, colour=args.colour)
    honcho.manager.KILL_WAIT = KILL_WAIT_SECONDS  # a module setting, read by Manager.loop
    manager.loop()
    sys.exit(manager.returncode)


if __name__ == "__main__":
    main()
