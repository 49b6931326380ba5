#!/usr/bin/env bash
# The machine packages `make test` needs besides Python, in one place (the Makefile and .ci/run
# call this): Debian's Chromium for the two browser tests (tests/feedback/test_dashboard_browser.py,
# tests/openapi/test_docs_browser.py; Playwright never downloads a browser) and Postfix's
# smtp-sink (tests/delivery/test_smtp_pipelining.py, tests/e2e/test_million_day_small.py).
#
# Missing ones are installed when this runs as root with apt-get (Debian, Ubuntu, CI), with
# Postfix's daemon kept from starting (it would listen on every interface): policy-rc.d forbids
# service starts during the install. Otherwise it exits 1 at once, naming what is missing and
# the one command that installs it, so a run never fails 7 minutes in.
#
# NOTIFIER_SYSTEM_ROOT (default: /) is where the executables are looked for and policy-rc.d is
# written: tests/test_test_packages.py points it at a temporary directory and PATH at fakes.
set -euo pipefail

root="${NOTIFIER_SYSTEM_ROOT:-}"
chromium="$root/usr/bin/chromium"
smtp_sink="$root/usr/sbin/smtp-sink"
missing=()

find_missing() {
  missing=()
  [ -x "$chromium" ] || missing+=(chromium)
  [ -x "$smtp_sink" ] || missing+=(postfix)
}

apt_install() {
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  local guard="$root/usr/sbin/policy-rc.d" created="" status=0
  if [ ! -e "$guard" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$guard"
    chmod +x "$guard"
    created=1
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } || status=$?
  if [ -n "$created" ]; then rm -f "$guard"; fi
  return "$status"
}

can_install() {
  command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]
}

find_missing
[ ${#missing[@]} -eq 0 ] && exit 0
if can_install; then
  printf 'installing %s (apt-get) for the browser and smtp-sink tests\n' "${missing[*]}" >&2
  apt_install "${missing[@]}" || true
  find_missing
  [ ${#missing[@]} -eq 0 ] && exit 0
fi

printf 'make test needs %s: Debian'"'"'s chromium at %s (2 browser tests) and Postfix'"'"'s smtp-sink at %s (2 SMTP tests).\n' \
  "${missing[*]}" "$chromium" "$smtp_sink" >&2
if command -v apt-get >/dev/null 2>&1; then
  printf 'Install them with:\n  sudo devtools/test_packages.sh\n' >&2
else
  printf 'Install them with your package manager at those paths (no apt-get here), or run a part of the suite: make test PYTEST_ARGS=tests/delivery\n' >&2
fi
exit 1
