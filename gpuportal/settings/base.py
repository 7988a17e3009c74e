"""What every profile shares: the apps, the request pipeline, templates, languages, static files and mail."""

from pathlib import Path

import dj_database_url
from django.utils.translation import gettext_lazy as _

from gpuportal.settings.environment import env_int, env_str
from gpuportal.storage.cursors import BoundCursor

BASE_DIR = Path(__file__).resolve().parent.parent.parent

#: The portal's own apps and the libraries they build on. The demo's seed data and the benchmarks (``demo``,
#: ``bench``) are not among them: the embedded profile and the tests add them, production leaves them out.
PORTAL_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "gpuportal",
    "tenants",
    "accounts",  # sign-in lockout and API tokens
    "axes",
    "audit",
    "fleet",
    "scheduling",
    "metering",
    "governance",
    "directory",
]

MIDDLEWARE = [
    "gpuportal.observability.health.HealthCheckMiddleware",  # /healthz, /readyz: before host checks and redirects
    "gpuportal.observability.logs.RequestLogMiddleware",  # a request id and one log line per request
    "django.middleware.security.SecurityMiddleware",
    "gpuportal.web.csp.ContentSecurityPolicyMiddleware",  # the Content-Security-Policy header (security.py)
    # On the workload origin only the workloads' own URLs answer and the portal's cookies are dropped before
    # anything reads them (scheduling/workloads/origin.py): so before whitenoise and the session middleware.
    "scheduling.workloads.origin.WorkloadOriginMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "gpuportal.web.validation.InputPolicyMiddleware",  # NUL in a path, query or form: 400 naming the field
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tenants.middleware.TenantLogContextMiddleware",  # the user's tenants in the log lines
    "accounts.preferences.languages.LanguageMiddleware",  # the person's own language choice, from the session
    "accounts.preferences.timezones.TimeZoneMiddleware",  # each person's time zone, from the session
    "axes.middleware.AxesMiddleware",  # turns a locked-out sign-in into accounts.lockout's 429
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
                "governance.notifications.context_processors.notifications",
            ],
        },
    },
]
WSGI_APPLICATION = "gpuportal.wsgi.application"


#: Runs of one statement on a connection before psycopg prepares it (psycopg's own default).
DEFAULT_PREPARE_AFTER = 5


def database(url: str) -> dict:
    """The default database from its URL (postgres://… or sqlite:///…). Connections are kept between requests
    (GPUPORTAL_DB_CONN_MAX_AGE seconds, checked before reuse): opening a PostgreSQL connection per request cost
    more CPU than the job list itself (bench_portal)."""
    settings = dj_database_url.parse(url, conn_max_age=env_int("GPUPORTAL_DB_CONN_MAX_AGE", 60),
                                     conn_health_checks=True)
    if settings["ENGINE"].endswith("postgresql"):
        settings["OPTIONS"] = postgresql_options(env_int("GPUPORTAL_DB_PREPARE_AFTER", DEFAULT_PREPARE_AFTER))
    if settings["ENGINE"].endswith("sqlite3"):
        # The demo runs the web server and the scheduler loop as two processes on one file: WAL lets readers
        # and a writer proceed together, IMMEDIATE transactions and a timeout turn lock clashes into waits.
        settings["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return settings


def postgresql_options(prepare_after: int) -> dict:
    """Parameters sent apart from the SQL (``gpuportal.storage.cursors``), so that psycopg prepares a query once it
    ran ``prepare_after`` times on a connection; 0: never, and the values are merged into the SQL (Django's
    default cursor).

    Why: PostgreSQL planned the pages' joins afresh at every request, and planning cost ten times the
    execution. A pooler in transaction mode that does not track prepared statements (PgBouncer before 1.21, or
    without ``max_prepared_statements``) needs 0."""
    if prepare_after <= 0:
        return {}
    return {"cursor_factory": BoundCursor, "prepare_threshold": prepare_after}


DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

#: SQLite (the embedded demo) ignores the INCLUDE column of the readings' covering index; PostgreSQL uses it.
QUIET_CHECKS = ["models.W040"]

LOGIN_URL = "login"  # URL names: django.contrib.auth.urls at /accounts/
LOGIN_REDIRECT_URL = "scheduling:dashboard"
LOGOUT_REDIRECT_URL = "login"
# The largest form body a page takes (an acceptance screenshot of 5 MB and its note), refused with a 400 before
# it is read (gpuportal.web.validation); the ingress's own body limit sits above it.
MAX_FORM_BODY_BYTES = env_int("GPUPORTAL_MAX_FORM_MB", 6) * 2**20

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Where the portal's formats differ from Django's (figures grouped by thousands in Chinese too).
FORMAT_MODULE_PATH = ["gpuportal.text.formats"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# The charts' plotly.js is static/plotly/plotly-basic.min.js, kept in the repository (no CDN).
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("GPUPORTAL_STATIC_ROOT", str(BASE_DIR / "staticfiles")))

# The portal's address as the pods see it (progress reports); also used in notification mails.
PORTAL_URL = env_str("GPUPORTAL_URL", "http://127.0.0.1:8000")

# Mail (the relay, the sender, retries): mail.py.
