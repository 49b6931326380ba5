"""devtools/test_packages.sh, the machine-package check `make test` runs first, against fakes.

The script looks for the executables under NOTIFIER_SYSTEM_ROOT and finds apt-get, id and
debconf-set-selections on PATH, so each case runs it with a temporary root and a PATH of fakes:
nothing is installed, apt-get never runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "devtools" / "test_packages.sh"
BASH = shutil.which("bash") or "/bin/bash"

# Creates what each package would install, and logs its arguments and whether the
# policy-rc.d guard was in place while it ran.
FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$FAKE_LOG"
[ -x "$NOTIFIER_SYSTEM_ROOT/usr/sbin/policy-rc.d" ] && echo "guarded" >> "$FAKE_LOG"
[ "$1" = install ] || exit 0
for package in "$@"; do
  case "$package" in
    chromium) printf '#!/bin/sh\\n' > "$NOTIFIER_SYSTEM_ROOT/usr/bin/chromium"
              chmod +x "$NOTIFIER_SYSTEM_ROOT/usr/bin/chromium" ;;
    postfix) printf '#!/bin/sh\\n' > "$NOTIFIER_SYSTEM_ROOT/usr/sbin/smtp-sink"
             chmod +x "$NOTIFIER_SYSTEM_ROOT/usr/sbin/smtp-sink" ;;
  esac
done
"""


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(body)
    path.chmod(0o755)


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    """An empty system root with a bin/ of fakes: only chmod, rm and cat are real."""
    for directory in ("usr/bin", "usr/sbin", "bin"):
        (tmp_path / directory).mkdir(parents=True)
    for tool in ("chmod", "rm", "cat"):
        (tmp_path / "bin" / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    _fake(tmp_path / "bin", "debconf-set-selections", '#!/bin/sh\ncat >> "$FAKE_LOG"\n')
    return tmp_path


def _run(machine: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(machine / "bin"), "NOTIFIER_SYSTEM_ROOT": str(machine),
           "FAKE_LOG": str(machine / "log")}
    return subprocess.run([BASH, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)


def _log(machine: Path) -> str:
    log = machine / "log"
    return log.read_text() if log.exists() else ""


def _install(machine: Path, executable: str) -> None:
    path = machine / executable
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_nothing_to_do_when_both_are_there(machine: Path):
    _install(machine, "usr/bin/chromium")
    _install(machine, "usr/sbin/smtp-sink")
    _fake(machine / "bin", "apt-get", FAKE_APT_GET)
    _fake(machine / "bin", "id", "#!/bin/sh\necho 0\n")
    result = _run(machine)
    assert (result.returncode, result.stderr) == (0, "")
    assert _log(machine) == ""


def test_without_apt_get_it_stops_at_once_naming_what_is_missing(machine: Path):
    _install(machine, "usr/sbin/smtp-sink")
    result = _run(machine)
    assert result.returncode == 1
    assert f"make test needs chromium: Debian's chromium at {machine}/usr/bin/chromium" in result.stderr
    assert "no apt-get here" in result.stderr


def test_not_root_it_gives_the_one_command_and_installs_nothing(machine: Path):
    _fake(machine / "bin", "apt-get", FAKE_APT_GET)
    _fake(machine / "bin", "id", "#!/bin/sh\necho 1000\n")
    result = _run(machine)
    assert result.returncode == 1
    assert "make test needs chromium postfix" in result.stderr
    assert "sudo devtools/test_packages.sh" in result.stderr
    assert _log(machine) == ""


def test_as_root_with_apt_get_it_installs_with_the_daemon_kept_stopped(machine: Path):
    _fake(machine / "bin", "apt-get", FAKE_APT_GET)
    _fake(machine / "bin", "id", "#!/bin/sh\necho 0\n")
    result = _run(machine)
    assert result.returncode == 0, result.stderr
    assert _log(machine).splitlines() == [
        "postfix postfix/main_mailer_type select No configuration",
        "apt-get update -qq", "guarded",
        "apt-get install -y -qq chromium postfix", "guarded",
    ]
    assert not (machine / "usr/sbin/policy-rc.d").exists(), "the guard it created is removed"
    assert os.access(machine / "usr/bin/chromium", os.X_OK)


def test_as_root_a_failed_install_still_stops_the_run(machine: Path):
    _fake(machine / "bin", "apt-get", '#!/bin/sh\necho "apt-get $*" >> "$FAKE_LOG"\nexit 100\n')
    _fake(machine / "bin", "id", "#!/bin/sh\necho 0\n")
    result = _run(machine)
    assert result.returncode == 1
    assert "sudo devtools/test_packages.sh" in result.stderr
    assert not (machine / "usr/sbin/policy-rc.d").exists()
