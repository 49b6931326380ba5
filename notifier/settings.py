"""Settings for notifier, all read from the environment in this one module.

Every variable has a safe local default so a fresh checkout runs with no configuration:
SQLite under var/, an embedded Redis (notifier/embedded.py) and an SMTP sink on 127.0.0.1:8025.
The README lists every variable. Only Django's own settings carry the DJANGO_ prefix.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
VAR_DIR = Path(env.str("NOTIFIER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _local_secret_key() -> str:
    """A per-checkout key kept under var/, so no secret is ever committed."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


# --- Django core -----------------------------------------------------------------------------
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _local_secret_key()
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_api_key",
    "django_celery_beat",
    "clients",
    "templates",
    "campaigns",
    "delivery",
    "scheduling",
    "feedback",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "notifier.urls"
WSGI_APPLICATION = "notifier.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database --------------------------------------------------------------------------------
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'notifier.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a worker writes; IMMEDIATE avoids the
    # "database is locked" upgrade deadlock between concurrent writers.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DJANGO_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis and the Celery broker ---------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
EMBEDDED_REDIS_DIR = VAR_DIR / "redis"
if not REDIS_URL:
    from notifier.embedded import ensure_embedded_redis

    _socket = ensure_embedded_redis(EMBEDDED_REDIS_DIR)
    REDIS_URL = f"unix://{_socket}"
    _default_broker = f"redis+socket://{_socket}"
else:
    _default_broker = REDIS_URL
REDIS_KEY_PREFIX = env.str("NOTIFIER_REDIS_PREFIX", default="notifier")

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=_default_broker)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = "maintenance"
CELERY_WORKER_SEND_TASK_EVENTS = env.bool("NOTIFIER_TASK_EVENTS", default=True)
CELERY_TASK_SEND_SENT_EVENT = CELERY_WORKER_SEND_TASK_EVENTS
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # A send task never runs anywhere near this long; retry delays stay far below it
    # (celery#2599: a task unacked past this is delivered again).
    "visibility_timeout": env.int("NOTIFIER_VISIBILITY_TIMEOUT", default=3600),
    "confirm_publish": True,
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

# --- Delivery ----------------------------------------------------------------------------------
NOTIFIER_PROVIDERS = env.list("NOTIFIER_PROVIDERS", default=["smtp"])
NOTIFIER_FROM_EMAIL = env.str("NOTIFIER_FROM_EMAIL", default="notifier@localhost")
SMTP_HOST = env.str("SMTP_HOST", default="127.0.0.1")
SMTP_PORT = env.int("SMTP_PORT", default=8025)
SMTP_USER = env.str("SMTP_USER", default="")
SMTP_PASSWORD = env.str("SMTP_PASSWORD", default="")
SMTP_STARTTLS = env.bool("SMTP_STARTTLS", default=False)
SMTP_TIMEOUT_SECONDS = env.float("SMTP_TIMEOUT_SECONDS", default=10.0)
# A claimed row whose worker vanished before handing it to a provider goes back to the queue
# after this lease; one handed over with no answer becomes AMBIGUOUS after the second figure.
NOTIFIER_CLAIM_LEASE_SECONDS = env.int("NOTIFIER_CLAIM_LEASE_SECONDS", default=60)
NOTIFIER_AMBIGUOUS_AFTER_SECONDS = env.int("NOTIFIER_AMBIGUOUS_AFTER_SECONDS", default=300)
# A transactional row still QUEUED this long is published again (its task may have been lost).
NOTIFIER_REQUEUE_AFTER_SECONDS = env.int("NOTIFIER_REQUEUE_AFTER_SECONDS", default=120)
# Fault injection for the crash tests only: hold a claimed batch this long before rendering.
NOTIFIER_FAULT_PAUSE_AFTER_CLAIM = env.float("NOTIFIER_FAULT_PAUSE_AFTER_CLAIM", default=0.0)
MAIL_SINK_DIR = VAR_DIR / "mail"

# --- Campaigns ----------------------------------------------------------------------------------
# Base of the signed one-click unsubscribe links in campaign mail (RFC 8058 wants https).
NOTIFIER_PUBLIC_URL = env.str("NOTIFIER_PUBLIC_URL", default="http://127.0.0.1:8000")

# --- API ---------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["clients.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "notifier.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
API_KEY_CUSTOM_HEADER = None  # keys travel as "Authorization: Api-Key <key>"
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("NOTIFIER_MAX_BODY_BYTES", default=10 * 1024 * 1024)

# --- Static files, i18n, logging -------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("NOTIFIER_LOG_LEVEL", default="INFO")},
}
