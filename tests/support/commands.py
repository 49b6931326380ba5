"""Management commands run in-process as an operator runs them, their output captured."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command


def command_run(*argv: str) -> tuple[str, str]:
    """(stdout, stderr) of `manage.py <argv> --quiet` (the progress bar hidden)."""
    out, err = StringIO(), StringIO()
    call_command(*argv, "--quiet", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()
