"""`make run`: the whole system in the foreground on embedded defaults; Ctrl-C stops it all.

Starts (unless the environment points elsewhere) the embedded Redis and the SMTP sink, migrates,
ensures a demo API key and template, then runs every process of the Procfile under honcho and
prints a curl command that sends an email which lands in var/mail/.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DEMO_TEMPLATE = {
    "name": "welcome",
    "subject": "Welcome, {{ name }}!",
    "html_body": (
        "<style>h1{color:#2a6}</style><h1>Hello {{ name }}</h1>"
        "<p>Your code is <b>{{ code }}</b>.</p>"
    ),
}


def _manage(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True, capture_output=True, text=True
    )
    return result.stdout


def _prepare_environment() -> dict[str, str]:
    env = dict(os.environ)
    # Procfile commands say `python`/`celery`: make them this virtualenv's.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PORT", "8000")
    env.setdefault("NOTIFIER_WORKER_SCALE", "0.1")
    env.setdefault("NOTIFIER_WORKER_P2_CONCURRENCY", "2")
    if not env.get("REDIS_URL"):
        from notifier.embedded import ensure_embedded_redis

        socket = ensure_embedded_redis(BASE_DIR / "var" / "redis")
        env["REDIS_URL"] = f"unix://{socket}"
        env.setdefault("CELERY_BROKER_URL", f"redis+socket://{socket}")
    return env


def _start_smtp_sink(env: dict[str, str]) -> subprocess.Popen | None:
    if env.get("SMTP_HOST"):
        return None
    port = env.setdefault("SMTP_PORT", "8025")
    command = [sys.executable, "-m", "notifier.smtp_sink", "--port", port, "--dir", "var/mail"]
    return subprocess.Popen(command, cwd=BASE_DIR, env=env)


def _demo_key() -> str:
    key_file = BASE_DIR / "var" / "demo_api_key"
    if key_file.exists():
        return key_file.read_text().strip()
    key = _manage("create_api_key", "demo").strip().splitlines()[-1]
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key


def _ensure_demo_template() -> None:
    code = (
        "from templates.services import template_create;"
        "from templates.models import Template;"
        f"Template.objects.filter(name={DEMO_TEMPLATE['name']!r}).exists() or "
        f"template_create(**{DEMO_TEMPLATE!r})"
    )
    _manage("shell", "-c", code)


def _print_banner(env: dict[str, str], key: str) -> None:
    port = env["PORT"]
    print(
        f"\nnotifier is starting on http://127.0.0.1:{port}  (admin: /admin/, health: /healthz,"
        f" Flower: http://127.0.0.1:{env.get('FLOWER_PORT', '5555')})\n"
        "Send an email (it lands in var/mail/ as an .eml file):\n\n"
        f"curl -s -X POST http://127.0.0.1:{port}/api/v1/messages \\\n"
        f"  -H 'Authorization: Api-Key {key}' -H 'Content-Type: application/json' \\\n"
        "  -d '{\"to\": \"you@example.com\", \"template\": \"welcome\", \"priority\": \"critical\","
        " \"context\": {\"name\": \"Ada\", \"code\": \"123456\"}}'\n",
        flush=True,
    )


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)  # stop everything on SIGTERM as on Ctrl-C
    os.chdir(BASE_DIR)
    embedded_redis = not os.environ.get("REDIS_URL")
    env = _prepare_environment()
    os.environ.update(env)
    sink = _start_smtp_sink(env)
    try:
        _manage("migrate", "--noinput")
        _ensure_demo_template()
        _print_banner(env, _demo_key())
        honcho = [sys.executable, "-m", "honcho", "-f", "Procfile", "start", "-p", env["PORT"]]
        process = subprocess.Popen(honcho, cwd=BASE_DIR, env=env)
        try:
            process.wait()
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    finally:
        if sink:
            sink.terminate()
        if embedded_redis:
            from notifier.embedded import stop_embedded_redis

            stop_embedded_redis(BASE_DIR / "var" / "redis")


if __name__ == "__main__":
    main()
