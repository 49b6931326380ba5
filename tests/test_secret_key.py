"""A placeholder DJANGO_SECRET_KEY stops the processes at startup; an unset key keeps local runs."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from notifier.secret_key import refuse_weak_secret_key, weak_secret_key_reason
from testkit import processes

GOOD_KEY = "kP3v9Qm2xR7tY1wZ8sD4fG6hJ0lA5cB-nE_uI2oK7qW"


@pytest.mark.parametrize(
    "value",
    ["change-me", "changeme", "Change_Me", "change-me-to-a-long-random-string-in-production",
     "secret", "secret-key", "", "   ", "django-insecure-" + "x1y2z3w4" * 6],
)
def test_placeholders_are_refused(value):
    assert weak_secret_key_reason(value) == "is a placeholder"


def test_short_and_repetitive_keys_are_refused():
    assert weak_secret_key_reason("kP3v9Qm2xR7tY1wZ") == "is shorter than 32 characters"
    assert weak_secret_key_reason("ab" * 30) == "has fewer than 5 distinct characters"


def test_a_long_random_key_is_accepted():
    assert weak_secret_key_reason(GOOD_KEY) is None
    refuse_weak_secret_key(GOOD_KEY)
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY is a placeholder"):
        refuse_weak_secret_key("change-me")


def _run(argv: list[str], **env: str | None) -> subprocess.CompletedProcess:
    child_env = processes.subprocess_env()
    for name in ("DJANGO_SECRET_KEY", "DJANGO_DEBUG"):
        child_env.pop(name, None)
    child_env.update({name: value for name, value in env.items() if value is not None})
    return subprocess.run(
        [sys.executable, *argv], cwd=settings.BASE_DIR, env=child_env, capture_output=True, text=True,
        timeout=120,
    )


def test_manage_py_check_refuses_the_placeholder_key():
    result = _run(["manage.py", "check"], DJANGO_SECRET_KEY="change-me")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is a placeholder" in result.stderr


def test_manage_py_check_passes_with_an_unset_key_or_a_real_one_or_debug():
    assert _run(["manage.py", "check"]).returncode == 0  # the per-checkout key under var/
    assert _run(["manage.py", "check"], DJANGO_SECRET_KEY=GOOD_KEY).returncode == 0
    assert _run(["manage.py", "check"], DJANGO_SECRET_KEY="change-me", DJANGO_DEBUG="true").returncode == 0


def test_the_web_server_refuses_to_start_with_the_placeholder_key():
    result = _run(
        ["-m", "granian", "--interface", "wsgi", "--port", "0", "--workers", "1",
         "notifier.wsgi:application"],
        DJANGO_SECRET_KEY="change-me",
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is a placeholder" in result.stderr
