"""Settings, read from the environment.

Two modes:

* embedded (the default): SQLite under ``var/``, no Redis, Celery tasks run in-process. This is what
  ``make demo`` uses, so a fresh machine needs nothing but Python.
* production (``GPUPORTAL_ENV=production``): every value that must not be guessed (``SECRET_KEY``,
  ``DATABASE_URL``, ``CELERY_BROKER_URL``, ``ALLOWED_HOSTS``) is required, and start-up fails fast with
  the name of the missing variable instead of silently falling back to a demo default.
"""

import os
from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent.parent
ENVIRONMENT = os.environ.get("GPUPORTAL_ENV", "embedded")
PRODUCTION = ENVIRONMENT == "production"
_REQUIRED_IN_PRODUCTION = ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "ALLOWED_HOSTS")


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value:
        return value
    if PRODUCTION and name in _REQUIRED_IN_PRODUCTION:
        raise ImproperlyConfigured(f"{name} must be set when GPUPORTAL_ENV=production")
    return default


SECRET_KEY = _env("SECRET_KEY", "embedded-demo-key-not-for-production")
DEBUG = os.environ.get("DEBUG", "0" if PRODUCTION else "1") == "1"
ALLOWED_HOSTS = [h.strip() for h in _env("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "gpuportal",
    "tenants",
    "audit",
    "fleet",
    "scheduling",
    "metering",
    "governance",
    "demo",
    "bench",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.log.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gpuportal.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "tenants.context_processors.roles",
                "governance.context_processors.notifications",
            ],
        },
    },
]
WSGI_APPLICATION = "gpuportal.wsgi.application"

# Database: DATABASE_URL (postgres://…) or the embedded SQLite file.
_SQLITE_PATH = BASE_DIR / "var" / "gpuportal.sqlite3"
DATABASES = {"default": dj_database_url.parse(_env("DATABASE_URL", f"sqlite:///{_SQLITE_PATH}"), conn_max_age=0)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The demo runs the web server and the scheduler loop as two processes on one file: WAL lets readers
    # and a writer proceed together, IMMEDIATE transactions and a timeout turn lock clashes into waits.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [] if not PRODUCTION else [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# SQLite (the embedded demo) ignores the INCLUDE column of the readings' covering index; PostgreSQL uses it.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

STATIC_URL = "/static/"
# plotly.js comes from the installed plotly package (no CDN): served as static/plotly/plotly.min.js.
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(plotly.__file__).parent / "package_data")]
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "gpuportal.api.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "gpuportal.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Portal API",
    "DESCRIPTION": "Everything the portal's pages do: jobs, queue positions, wait reasons, quotas.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's files come from the drf-spectacular-sidecar package, served by the site: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery. Embedded mode has no broker: tasks run eagerly in the calling process, and the scheduler loop
# (`manage.py scheduler_loop`) fires the beat schedule declared in gpuportal/celery.py itself.
CELERY_BROKER_URL = _env("CELERY_BROKER_URL", "memory://localhost/")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", CELERY_BROKER_URL if PRODUCTION else None)
CELERY_TASK_ALWAYS_EAGER = os.environ.get(
    "CELERY_TASK_ALWAYS_EAGER", "0" if os.environ.get("CELERY_BROKER_URL") else "1"
) == "1"
CELERY_TASK_EAGER_PROPAGATES = True

# Scheduling and simulation knobs.
SCHEDULER = {
    # Largest max runtime a job may ask for, in minutes (7 days).
    "MAX_RUNTIME_MINUTES": int(os.environ.get("GPUPORTAL_MAX_RUNTIME_MINUTES", 7 * 24 * 60)),
    "PASS_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_PASS_INTERVAL", 10)),
    "SYNC_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_SYNC_INTERVAL", 5)),
    "POLL_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_POLL_INTERVAL", 15)),
}
# Node agents: how they are polled and when a node or GPU changes health.
AGENTS = {
    "POLL_WORKERS": int(os.environ.get("GPUPORTAL_POLL_WORKERS", 64)),
    "POLL_TIMEOUT_SECONDS": float(os.environ.get("GPUPORTAL_POLL_TIMEOUT", 3)),
    # healthy -> suspect after one missed poll; -> unhealthy after K missed polls in a row
    "MISSED_POLLS_UNHEALTHY": int(os.environ.get("GPUPORTAL_MISSED_POLLS_UNHEALTHY", 3)),
    # suspect or unhealthy -> healthy after M good polls in a row
    "GOOD_POLLS_HEALTHY": int(os.environ.get("GPUPORTAL_GOOD_POLLS_HEALTHY", 3)),
    # Kept longer than a month so that a closed month can still be rolled up again from its readings.
    "READINGS_RETENTION_DAYS": int(os.environ.get("GPUPORTAL_READINGS_RETENTION_DAYS", 45)),
}
# Metering: the currency of GPU prices; how often the rollup of yesterday and today runs.
METERING = {
    "CURRENCY": os.environ.get("GPUPORTAL_CURRENCY", "USD"),
    "ROLLUP_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_ROLLUP_INTERVAL", 3600)),
}
# Kubernetes dispatch: retries of API calls (5xx, 429, timeouts) with exponential backoff, connections per
# cluster, how long one watch stream lasts before the next beat tick starts another.
KUBERNETES = {
    "RETRIES": int(os.environ.get("GPUPORTAL_K8S_RETRIES", 4)),
    "BACKOFF_SECONDS": float(os.environ.get("GPUPORTAL_K8S_BACKOFF", 0.2)),
    "REQUEST_TIMEOUT_SECONDS": float(os.environ.get("GPUPORTAL_K8S_TIMEOUT", 10)),
    "CONNECTIONS": int(os.environ.get("GPUPORTAL_K8S_CONNECTIONS", 32)),
    "WATCH_SECONDS": float(os.environ.get("GPUPORTAL_K8S_WATCH_SECONDS", 55)),
    "LOG_TAIL_LINES": 50,
    "DISPATCH_WORKERS": int(os.environ.get("GPUPORTAL_K8S_DISPATCH_WORKERS", 16)),
}
# The portal's address as the pods see it (progress reports); also used in notification mails.
PORTAL_URL = os.environ.get("GPUPORTAL_URL", "http://127.0.0.1:8000")

# Mail: the console in the demo (notifications are printed); SMTP settings in production.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", 25))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpuportal@localhost")

# Governance: how long a request waits for a decision; idle reclamation defaults (IdlePolicy rows override).
GOVERNANCE = {
    "REQUEST_TTL_HOURS": float(os.environ.get("GPUPORTAL_REQUEST_TTL_HOURS", 72)),
    "IDLE_THRESHOLD_PCT": int(os.environ.get("GPUPORTAL_IDLE_THRESHOLD_PCT", 5)),
    "IDLE_MINUTES": int(os.environ.get("GPUPORTAL_IDLE_MINUTES", 60)),
    "IDLE_GRACE_MINUTES": int(os.environ.get("GPUPORTAL_IDLE_GRACE_MINUTES", 30)),
    "IDLE_EXEMPT_TASK_TYPES": [t.strip() for t in os.environ.get("GPUPORTAL_IDLE_EXEMPT", "inference").split(",")
                               if t.strip()],
    "IDLE_CHECK_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_IDLE_CHECK_INTERVAL", 300)),
    # Older state changes (back-dated imports, the demo's history) are not announced.
    "NOTIFY_MAX_AGE_SECONDS": 900,
}
# /metrics: with a token set, scrapers send "Authorization: Bearer <token>"; without one, only the listed
# addresses may scrape.
METRICS = {
    "TOKEN": os.environ.get("GPUPORTAL_METRICS_TOKEN", ""),
    "ALLOWED_IPS": [a.strip() for a in os.environ.get("GPUPORTAL_METRICS_ALLOWED_IPS", "127.0.0.1,::1").split(",")
                    if a.strip()],
}
# Per-node agent tokens are derived from this secret (HMAC of node name and token version) and only their
# SHA-256 is stored, so a copy of the database does not reveal them.
AGENT_TOKEN_SECRET = os.environ.get("GPUPORTAL_AGENT_TOKEN_SECRET", SECRET_KEY)

# Simulated cluster: one simulated second lasts SIMULATION_TIME_SCALE real seconds (0.01 = 100x faster),
# so demo jobs with runtimes of tens of minutes finish while someone watches.
SIMULATION_TIME_SCALE = float(os.environ.get("GPUPORTAL_SIMULATION_TIME_SCALE", "0.02"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "celery.app.trace": {"level": "WARNING"},
                "kombu": {"level": "WARNING"}},
}

if PRODUCTION:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = os.environ.get("HTTPS", "1") == "1"
