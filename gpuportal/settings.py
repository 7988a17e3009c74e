"""Settings, read from the environment.

Two modes:

* embedded (the default): SQLite under ``var/``, no Redis, Celery tasks run in-process. This is what
  ``make demo`` uses, so a fresh machine needs nothing but Python.
* production (``GPUPORTAL_ENV=production``): every value that must not be guessed (``SECRET_KEY``,
  ``DATABASE_URL``, ``CELERY_BROKER_URL``, ``ALLOWED_HOSTS``) is required, and start-up fails fast with
  the name of the missing variable instead of silently falling back to a demo default.
"""

import ipaddress  # audit: GPUPORTAL_TRUSTED_PROXIES
import os
from pathlib import Path

import dj_database_url
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
    "demo",
    "bench",
]

MIDDLEWARE = [
    "gpuportal.health.HealthCheckMiddleware",  # /healthz, /readyz: before host checks and redirects
    "gpuportal.logs.RequestLogMiddleware",  # a request id and one log line per request
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "gpuportal.validation.InputPolicyMiddleware",  # NUL in a path, query or form: 400 naming the field
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tenants.middleware.TenantLogContextMiddleware",  # the user's tenants in the log lines
    "accounts.languages.LanguageMiddleware",  # the person's own language choice, from the session
    "accounts.timezones.TimeZoneMiddleware",  # each person's time zone, from the session
    "axes.middleware.AxesMiddleware",  # turns a locked-out sign-in into accounts.lockout's 429 (part 5)
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
# Connections are kept between requests (GPUPORTAL_DB_CONN_MAX_AGE seconds, checked before reuse): opening
# a PostgreSQL connection per request cost more CPU than the job list itself (bench_portal).
DATABASES = {"default": dj_database_url.parse(_env("DATABASE_URL", f"sqlite:///{_SQLITE_PATH}"),
                                              conn_max_age=int(_env("GPUPORTAL_DB_CONN_MAX_AGE", "60")),
                                              conn_health_checks=True)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The demo runs the web server and the scheduler loop as two processes on one file: WAL lets readers
    # and a writer proceed together, IMMEDIATE transactions and a timeout turn lock clashes into waits.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Sign-in and API tokens (OWASP ASVS level 2) ----------------------------------------
# Password rules in every environment: the demo's and the tests' fixed users get "demo" through
# set_password, which does not validate.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": int(os.environ.get("GPUPORTAL_PASSWORD_MIN_LENGTH", 12))}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Failed sign-ins (login page, admin, POST /api/auth/token/) are counted per username and address together;
# after AXES_FAILURE_LIMIT of them that pair is refused, even with the right password, for the cool-off.
AUTHENTICATION_BACKENDS = ["accounts.lockout.LockoutBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("GPUPORTAL_LOGIN_FAILURE_LIMIT", 5))
AXES_COOLOFF_TIME = float(os.environ.get("GPUPORTAL_LOGIN_LOCKOUT_MINUTES", 15)) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The address of that pair by the trusted-proxy rule (gpuportal.clients), not the proxy's own address: behind
# an ingress, five bad passwords from anywhere would otherwise lock the account for everyone.
AXES_CLIENT_IP_CALLABLE = "gpuportal.clients.request_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_VERBOSE = False
# API tokens: lifetime in days when none is asked for, and the longest allowed.
API_TOKENS = {
    "DEFAULT_DAYS": int(os.environ.get("GPUPORTAL_API_TOKEN_DAYS", 90)),
    "MAX_DAYS": int(os.environ.get("GPUPORTAL_API_TOKEN_MAX_DAYS", 365)),
    "LAST_USED_RESOLUTION_SECONDS": 60,
}
# The dashboard and the API job list are kept this many seconds per session and dropped at once when the data
# under them changes (gpuportal.pagecache) — only with a shared cache, which the web processes
# and the workers all see; with the embedded per-process cache nothing is kept.
PAGE_CACHE = {"SECONDS": 0}
# DRF throttles count in the default cache: per process unless GPUPORTAL_CACHE_URL (redis://…) is set.
# The shared cache is a speed-up, never a dependency (gpuportal/cache.py): an operation that gets no answer
# within GPUPORTAL_CACHE_TIMEOUT seconds is a miss (throttles let the request through, sessions come from the
# database, pages are rendered afresh), and the process then leaves the cache alone for a second.
if os.environ.get("GPUPORTAL_CACHE_URL"):
    _CACHE_TIMEOUT = float(os.environ.get("GPUPORTAL_CACHE_TIMEOUT", "0.25"))
    CACHES = {"default": {"BACKEND": "gpuportal.cache.ResilientRedisCache",
                          "LOCATION": os.environ["GPUPORTAL_CACHE_URL"],
                          "OPTIONS": {"socket_timeout": _CACHE_TIMEOUT, "socket_connect_timeout": _CACHE_TIMEOUT},
                          "RETRY_SECONDS": 1.0}}
    PAGE_CACHE = {"SECONDS": int(os.environ.get("GPUPORTAL_PAGE_CACHE_SECONDS", "10"))}
    # Sessions read through the shared cache, written to both: one query less on every signed-in request.
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
# The largest form body a page takes (an acceptance screenshot of 5 MB and its note), refused with a 400 before
# it is read (gpuportal.validation); the ingress's own body limit sits above it.
MAX_FORM_BODY_BYTES = int(os.environ.get("GPUPORTAL_MAX_FORM_MB", "6")) * 2**20
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
# A refused CSRF check: the 403 page in the site's layout, saying to reload and send again.
CSRF_FAILURE_VIEW = "gpuportal.views.csrf_failure"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# SQLite (the embedded demo) ignores the INCLUDE column of the readings' covering index; PostgreSQL uses it.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

STATIC_URL = "/static/"
# The charts' plotly.js is static/plotly/plotly-basic.min.js, kept in the repository (no CDN).
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("GPUPORTAL_STATIC_ROOT", BASE_DIR / "staticfiles"))
# Production serves what `manage.py collectstatic` wrote there (whitenoise): names with a hash of the content,
# cached by browsers for ten years without asking again (Cache-Control: immutable), and gzip copies (plotly.js
# travels as 0.4 MB instead of 1.2). Templates then need the manifest, so collectstatic must run before the
# server starts. The embedded demo and the tests serve the source files as they are, without collectstatic.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage" if PRODUCTION
                    else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",  # hashed, expiring, revocable
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Part 5: per client address for anonymous calls, per user otherwise (rates like "60/min", "5000/hour").
    "DEFAULT_THROTTLE_CLASSES": ["accounts.throttles.AnonThrottle", "accounts.throttles.UserThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": os.environ.get("GPUPORTAL_API_THROTTLE_ANON", "60/min"),
                               "user": os.environ.get("GPUPORTAL_API_THROTTLE_USER", "6000/min")},
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "gpuportal.api.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["gpuportal.validation.ContractFilterBackend"],
    # The API as a contract. Bodies are one JSON object (anything else is a 400 or a 415); the schema
    # lists every error an operation answers; errors are field maps (400, 409, 422) or {"detail"}.
    "DEFAULT_PARSER_CLASSES": ["gpuportal.validation.JSONObjectParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_SCHEMA_CLASS": "gpuportal.schema.ContractSchema",
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
    # Request bodies get their own components: read-only fields are not asked for, write limits are shown.
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "gpuportal.schema.add_links"],
    "ENUM_NAME_OVERRIDES": {"TopologyEnum": "scheduling.models.Topology",
                            "JobStatusEnum": "scheduling.models.JobStatus",
                            "WorkloadKindEnum": "scheduling.models.WorkloadKind"},
    # A running job reports with its own token (POST /api/jobs/{id}/report/), an agent with its node's.
    "APPEND_COMPONENTS": {"securitySchemes": {
        "jobToken": {"type": "http", "scheme": "bearer", "description": (
            "The job's own token, GPUPORTAL_JOB_TOKEN in its environment; valid while that attempt runs.")},
        "agentToken": {"type": "http", "scheme": "bearer", "description": (
            "The node's agent token (issued on the node's page in the inventory), for POST /api/agents/register/.")}}},
}

# Celery. Embedded mode has no broker: tasks run eagerly in the calling process, and the scheduler loop
# (`manage.py scheduler_loop`) fires the beat schedule declared in gpuportal/celery.py itself.
CELERY_BROKER_URL = _env("CELERY_BROKER_URL", "memory://localhost/")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", CELERY_BROKER_URL if PRODUCTION else None)
CELERY_TASK_ALWAYS_EAGER = os.environ.get(
    "CELERY_TASK_ALWAYS_EAGER", "0" if os.environ.get("CELERY_BROKER_URL") else "1"
) == "1"
CELERY_TASK_EAGER_PROPAGATES = True
# Reliability: a task is acknowledged only once it has run, and given back to the queue when its worker dies
# (every task is idempotent); publishing gives up fast when the broker is down (the reconciler and the
# next beat tick pick the work up), so a request never hangs on it.
# How long an Idempotency-Key is remembered for a creating API call (gpuportal/idempotency.py).
IDEMPOTENCY_TTL_HOURS = float(os.environ.get("GPUPORTAL_IDEMPOTENCY_TTL_HOURS", 24))
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_TIMEOUT = float(os.environ.get("GPUPORTAL_BROKER_TIMEOUT", 2))
# A message stays in Redis, unacknowledged, while its task runs. When the worker dies (SIGKILL, OOM, a lost
# node) Redis hands it to another worker once it has been unacknowledged for the visibility timeout (kombu's
# default: an hour); workers look for such messages every 10 s. So every task has a time limit below that
# timeout: a task still running when it ran out would be handed out again and run twice at once. The check
# after KUBERNETES (it sets the watch's own limit) refuses a configuration that breaks the rule. Long work raises
# GPUPORTAL_VISIBILITY_TIMEOUT together with GPUPORTAL_TASK_TIME_LIMIT; one Redis database has one timeout for
# every queue, since any worker restores any queue's messages.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": float(os.environ.get("GPUPORTAL_VISIBILITY_TIMEOUT", 100)),
    "unacked_restore_interval": 10,
    "unacked_restore_throttle": 1,  # scan at every interval (kombu's default scans every tenth)
    "unacked_mutex_expire": 30,  # a worker killed during a scan blocks the next ones this long, not 5 minutes
}
# Hard limit (the worker process running the task is killed) and soft limit (the task gets an exception and
# its transaction rolls back first). A pass, a dispatch batch, a rollup or a poll cycle takes seconds.
CELERY_TASK_TIME_LIMIT = float(os.environ.get("GPUPORTAL_TASK_TIME_LIMIT", 75))
CELERY_TASK_SOFT_TIME_LIMIT = 0.9 * CELERY_TASK_TIME_LIMIT
# The reconciler (scheduling/passes/reconcile.py): how long a job may stay admitted or dispatching before it is
# repaired, and how often it runs.
RECONCILE = {
    "ADMITTED_SECONDS": float(os.environ.get("GPUPORTAL_RECONCILE_ADMITTED_SECONDS", 120)),
    "DISPATCHING_SECONDS": float(os.environ.get("GPUPORTAL_RECONCILE_DISPATCHING_SECONDS", 300)),
    "INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_RECONCILE_INTERVAL", 60)),
}

# Scheduling and simulation knobs.
SCHEDULER = {
    # Largest max runtime a job may ask for, in minutes (7 days).
    "MAX_RUNTIME_MINUTES": int(os.environ.get("GPUPORTAL_MAX_RUNTIME_MINUTES", 7 * 24 * 60)),
    "PASS_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_PASS_INTERVAL", 10)),
    "SYNC_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_SYNC_INTERVAL", 5)),
    "POLL_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_POLL_INTERVAL", 15)),
    # A retry avoids the nodes its earlier attempts failed on; after this many hours a node that is schedulable
    # again (repaired: healthy, not cordoned) is tried again.
    "AVOID_NODE_HOURS": float(os.environ.get("GPUPORTAL_AVOID_NODE_HOURS", 24)),
    # A job that avoids every node that could hold it fails at the next pass (its attempts say why); "1" keeps
    # it waiting with that reason instead, until the avoidance expires or an admin clears it.
    "WAIT_WHEN_ALL_NODES_AVOIDED": os.environ.get("GPUPORTAL_WAIT_WHEN_ALL_NODES_AVOIDED", "0") == "1",
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
    # --- agents cannot stall anyone ---
    # POLL_TIMEOUT_SECONDS is a total deadline per agent (connect, TLS, request, headers and body together).
    # A snapshot larger than this is refused as a failed poll (a healthy 8-GPU node sends ~20 KB).
    "MAX_SNAPSHOT_BYTES": int(os.environ.get("GPUPORTAL_AGENT_MAX_SNAPSHOT_BYTES", 1024 * 1024)),
    # Registration accepts only agent URLs whose every address lies in these networks (comma-separated
    # CIDRs). Link-local addresses (cloud metadata) are always refused; loopback only when a listed network
    # is itself loopback (e.g. 127.0.0.0/8 for a local trial or tests).
    "NETWORKS": [n.strip() for n in os.environ.get(
        "GPUPORTAL_AGENT_NETWORKS", "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7").split(",") if n.strip()],
    # CA bundle that signs the agents' TLS certificates (https agent URLs); empty: the system's CAs.
    "CA_FILE": os.environ.get("GPUPORTAL_AGENT_CA_FILE", ""),
}
# Polling runs on its own queue ("agents") so that slow agents never delay the pass, dispatch or sync:
# production runs `celery -A gpuportal worker -Q agents` beside the default worker (eager mode ignores it).
CELERY_TASK_ROUTES = {"fleet.tasks.poll_agents": {"queue": "agents"}}
# Metering: the currency of GPU prices; how often the rollup of yesterday and today runs.
METERING = {
    "CURRENCY": os.environ.get("GPUPORTAL_CURRENCY", "USD"),
    "ROLLUP_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_ROLLUP_INTERVAL", 3600)),
}
# The monthly review pack (metering/review/render/): the font that draws Chinese (and every other text) in the PDF
# and its charts; the image carries Debian's fonts-wqy-microhei there.
# Missing: the PDF falls back to reportlab's built-in STSong-Light for Chinese (charts then lack Chinese glyphs).
REVIEW_PACK = {
    "CJK_FONT": os.environ.get("GPUPORTAL_REVIEW_FONT", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
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
    # Notebooks and services behind the site's ingress controller (nginx): the host they are served on (empty:
    # no Ingress objects; notebooks open through the portal's own proxy), its class and TLS secret.
    "INGRESS_HOST": os.environ.get("GPUPORTAL_INGRESS_HOST", ""),
    "INGRESS_CLASS": os.environ.get("GPUPORTAL_INGRESS_CLASS", ""),
    "INGRESS_TLS_SECRET": os.environ.get("GPUPORTAL_INGRESS_TLS_SECRET", ""),
    # The ConfigMap ("namespace/name") whose X-Gpuportal-Ingress-Auth entry (the shared secret of
    # GPUPORTAL_INGRESS_AUTH_SECRET_FILE) nginx adds to its auth subrequests: without it the portal answers them
    # 403 and hands no notebook token (docs/security.md, "Origins").
    "INGRESS_AUTH_HEADERS": os.environ.get("GPUPORTAL_INGRESS_AUTH_HEADERS", ""),
}
# Celery time limits: the watch follows pod events for WATCH_SECONDS, so its limits follow that setting.
CELERY_TASK_ANNOTATIONS = {"scheduling.tasks.watch_kubernetes": {
    "soft_time_limit": KUBERNETES["WATCH_SECONDS"] + 10, "time_limit": KUBERNETES["WATCH_SECONDS"] + 15}}


def _check_task_time_limits() -> None:
    """Refuse to start with a task whose time limit is not below the broker's visibility timeout: such a task,
    still running when the timeout ran out, would be handed to a second worker and run twice at once."""
    visibility = CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    limits = {"default": (CELERY_TASK_SOFT_TIME_LIMIT, CELERY_TASK_TIME_LIMIT)}
    for name, given in CELERY_TASK_ANNOTATIONS.items():
        limits[name] = (given.get("soft_time_limit", CELERY_TASK_SOFT_TIME_LIMIT),
                        given.get("time_limit", CELERY_TASK_TIME_LIMIT))
    for task, (soft, hard) in limits.items():
        if not 0 < soft < hard < visibility:
            raise ImproperlyConfigured(
                f"Celery task time limits ({task}: soft {soft:g} s, hard {hard:g} s) must be positive, the soft one "
                f"below the hard one and both below the broker's visibility timeout ({visibility:g} s): raise "
                "GPUPORTAL_VISIBILITY_TIMEOUT, or lower GPUPORTAL_TASK_TIME_LIMIT (or GPUPORTAL_K8S_WATCH_SECONDS)")


_check_task_time_limits()

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

# --- Audit log and trusted proxies ------------------------------------------------------
# The chain is keyed (HMAC-SHA256) with a key kept outside the database, so whoever owns the tables cannot
# re-hash records they changed; its head is appended regularly to a file (and syslog) they cannot rewrite.
_audit_key_file = os.environ.get("GPUPORTAL_AUDIT_KEY_FILE", "")
_audit_key = os.environ.get("GPUPORTAL_AUDIT_KEY", "")
if not _audit_key and _audit_key_file:
    try:
        _audit_key = Path(_audit_key_file).read_text().strip()
    except OSError as error:
        raise ImproperlyConfigured(f"GPUPORTAL_AUDIT_KEY_FILE cannot be read: {error}") from error
if PRODUCTION and len(_audit_key) < 32:
    raise ImproperlyConfigured("GPUPORTAL_AUDIT_KEY (or GPUPORTAL_AUDIT_KEY_FILE) must hold at least 32 characters "
                               "when GPUPORTAL_ENV=production; keep it outside the database")
AUDIT = {
    # Embedded demo and tests: a key derived from SECRET_KEY (production refuses to start without its own).
    "KEY": (_audit_key or f"gpuportal-audit:{SECRET_KEY}").encode(),
    # Recorded with every keyed record, so that a future key can be introduced without re-hashing the past.
    "KEY_VERSION": int(os.environ.get("GPUPORTAL_AUDIT_KEY_VERSION", 1)),
    # Append-only JSON-lines file of exported chain heads ("" = none); syslog address: "/dev/log" or host:port.
    "HEAD_FILE": os.environ.get("GPUPORTAL_AUDIT_HEAD_FILE", ""),
    "HEAD_SYSLOG": os.environ.get("GPUPORTAL_AUDIT_HEAD_SYSLOG", ""),
    "HEAD_EXPORT_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_AUDIT_HEAD_INTERVAL", 300)),
}
if AUDIT["KEY_VERSION"] < 1:
    raise ImproperlyConfigured("GPUPORTAL_AUDIT_KEY_VERSION must be 1 or more (0 marks records written unkeyed)")
# The anchor: without heads exported out of the database, its owner can delete the newest records and put back an
# older head row (its MAC is valid) unseen. Production refuses to start without one (audit/heads.py).
if AUDIT["HEAD_SYSLOG"] and not (AUDIT["HEAD_SYSLOG"].startswith("/")
                                 or AUDIT["HEAD_SYSLOG"].rpartition(":")[2].isdigit()):
    raise ImproperlyConfigured("GPUPORTAL_AUDIT_HEAD_SYSLOG must be a socket path (/dev/log) or HOST:PORT (UDP)")
if PRODUCTION and AUDIT["HEAD_FILE"] and not os.path.isabs(AUDIT["HEAD_FILE"]):
    raise ImproperlyConfigured("GPUPORTAL_AUDIT_HEAD_FILE must be an absolute path")
if PRODUCTION and not (AUDIT["HEAD_FILE"] or AUDIT["HEAD_SYSLOG"]):
    raise ImproperlyConfigured(
        "GPUPORTAL_AUDIT_HEAD_FILE (an append-only file out of the database owner's reach) or "
        "GPUPORTAL_AUDIT_HEAD_SYSLOG (/dev/log or HOST:PORT of a syslog server) must be set when "
        "GPUPORTAL_ENV=production: the audit chain's head is exported there, so that deleting the newest audit "
        "records shows in manage.py verify_audit")
# Reverse proxies (CIDRs) whose X-Forwarded-For is believed for the source address of audit records; from any
# other peer the header is ignored and REMOTE_ADDR is recorded.
try:
    TRUSTED_PROXIES = [ipaddress.ip_network(c.strip(), strict=False)
                       for c in os.environ.get("GPUPORTAL_TRUSTED_PROXIES", "").split(",") if c.strip()]
except ValueError as error:
    raise ImproperlyConfigured(f"GPUPORTAL_TRUSTED_PROXIES must be a comma-separated list of CIDRs: {error}") from error
# --- end of audit log and trusted proxies -------------------------------------------------------------------

# Simulated cluster: one simulated second lasts SIMULATION_TIME_SCALE real seconds (0.01 = 100x faster),
# so demo jobs with runtimes of tens of minutes finish while someone watches.
SIMULATION_TIME_SCALE = float(os.environ.get("GPUPORTAL_SIMULATION_TIME_SCALE", "0.02"))

# Logs: JSON lines on stdout in production (or with GPUPORTAL_LOG_FORMAT=json), each with the
# request id, user and tenant (gpuportal.logs); plain text in the embedded demo, where runserver already
# prints one line per request.
LOG_FORMAT = os.environ.get("GPUPORTAL_LOG_FORMAT", "json" if PRODUCTION else "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "gpuportal.logs.ContextFilter"}},
    "formatters": {"json": {"()": "gpuportal.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "filters": ["context"],
                             **({"formatter": "json"} if LOG_FORMAT == "json" else {})}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "celery.app.trace": {"level": "WARNING"},
                "kombu": {"level": "WARNING"},
                "gpuportal.request": {"level": "INFO" if LOG_FORMAT == "json" else "WARNING"}},
}
# Celery keeps the logging configured above instead of installing its own text handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
# Beat touches its liveness file on every tick (manage.py liveness beat).
CELERY_BEAT_SCHEDULER = "gpuportal.liveness:LivenessScheduler"

if PRODUCTION:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = os.environ.get("HTTPS", "1") == "1"

# --- Deployment checks and security headers ---------------------------------------------
# Production refuses to start rather than run with settings an attacker can use: DEBUG pages leak settings
# and code, a weak key forges sessions and agent tokens, cookies sent over plain HTTP can be stolen.
_EMBEDDED_SECRET_KEY = "embedded-demo-key-not-for-production"
if PRODUCTION:
    if DEBUG:
        raise ImproperlyConfigured("DEBUG must be off when GPUPORTAL_ENV=production (unset DEBUG or set DEBUG=0)")
    if (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure-")
            or SECRET_KEY == _EMBEDDED_SECRET_KEY):
        raise ImproperlyConfigured(
            "SECRET_KEY is weak: give at least 50 characters, at least 5 distinct, not the django-insecure- "
            "prefix nor the embedded default (python -c 'import secrets; print(secrets.token_urlsafe(64))')")
    ALLOW_HTTP = os.environ.get("GPUPORTAL_ALLOW_HTTP", "0") == "1"
    if not SESSION_COOKIE_SECURE and not ALLOW_HTTP:
        raise ImproperlyConfigured("HTTPS=0 sends session and CSRF cookies in clear text; set "
                                   "GPUPORTAL_ALLOW_HTTP=1 to accept that for a lab without TLS")
    if not ALLOW_HTTP:
        SECURE_SSL_REDIRECT = True
        # Paths served over plain HTTP inside the cluster (regular expressions, no leading slash).
        SECURE_REDIRECT_EXEMPT = [p.strip() for p in os.environ.get("GPUPORTAL_SSL_REDIRECT_EXEMPT", "").split(",")
                                  if p.strip()]
        SECURE_HSTS_SECONDS = int(os.environ.get("GPUPORTAL_HSTS_SECONDS", 365 * 24 * 3600))
        SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("GPUPORTAL_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
        SECURE_HSTS_PRELOAD = os.environ.get("GPUPORTAL_HSTS_PRELOAD", "0") == "1"
        if not SECURE_HSTS_PRELOAD:
            # Preloading is a commitment to HTTPS for every subdomain, for months, that only the site's owner
            # can make: it stays off by default, so the deploy check's reminder about it is silenced.
            SILENCED_SYSTEM_CHECKS = [*SILENCED_SYSTEM_CHECKS, "security.W021"]
    if os.environ.get("GPUPORTAL_TRUSTED_PROXY_HEADER", "0") == "1":
        # Only behind a proxy that always sets (and never passes on) X-Forwarded-Proto.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# `check --deploy` is about the deployment's safety; drf-spectacular would add its notes on the API schema's
# wording there (they are the schema's business, shown by `manage.py spectacular --validate`).
SPECTACULAR_SETTINGS["ENABLE_DJANGO_DEPLOY_CHECK"] = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy, sent in every mode (gpuportal.csp.ContentSecurityPolicyMiddleware): scripts only
# from the site's own files (charts read their figures from <script type="application/json"> blocks, which
# are never executed); styles may be inline because plotly.js and Swagger UI set them.
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data:",
    "object-src": "'none'",
    "frame-ancestors": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
}
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                  "gpuportal.csp.ContentSecurityPolicyMiddleware")
# --- end of deployment checks and security headers ----------------------------------------------------------

# --- Directory sign-in ---------------------------------------------------------------------------
# People sign in with the site's directory: LDAP (django-auth-ldap) when GPUPORTAL_LDAP_URI is set, OpenID
# Connect (mozilla-django-oidc, code flow with PKCE, endpoints from the issuer's discovery document) when
# GPUPORTAL_OIDC_ISSUER is set. Their groups become tenant memberships and platform roles through the mapping
# platform admins edit on /directory/groups/ (or `manage.py map_group`); directory/ holds the rules. Secrets
# come from files, never from the environment itself. Local accounts (the demo's) keep signing in unless
# GPUPORTAL_LOCAL_LOGIN=0, which leaves a local password only to platform admins (break-glass).
INSTALLED_APPS = [*INSTALLED_APPS, "directory"]


def _directory_secret(variable: str) -> str:
    path = os.environ.get(variable, "")
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError as error:
        raise ImproperlyConfigured(f"{variable} cannot be read: {error}") from error


_LDAP_URI = os.environ.get("GPUPORTAL_LDAP_URI", "")
_OIDC_ISSUER = os.environ.get("GPUPORTAL_OIDC_ISSUER", "").rstrip("/")
DIRECTORY = {
    # Off: only platform admins (and superusers) may sign in with a local password.
    "LOCAL_LOGIN": os.environ.get("GPUPORTAL_LOCAL_LOGIN", "1") == "1",
    # How often the beat brings every LDAP-signed-in person's memberships in line with the directory.
    "SYNC_INTERVAL_SECONDS": float(os.environ.get("GPUPORTAL_DIRECTORY_SYNC_INTERVAL", 900)),
    "LDAP": {
        "URI": _LDAP_URI,  # ldap://host:389 (with GPUPORTAL_LDAP_START_TLS=1) or ldaps://host:636
        "BIND_DN": os.environ.get("GPUPORTAL_LDAP_BIND_DN", ""),
        "BIND_PASSWORD": _directory_secret("GPUPORTAL_LDAP_BIND_PASSWORD_FILE"),
        "USER_BASE": os.environ.get("GPUPORTAL_LDAP_USER_BASE", ""),
        "USER_FILTER": os.environ.get("GPUPORTAL_LDAP_USER_FILTER", "(uid=%(user)s)"),
        "GROUP_BASE": os.environ.get("GPUPORTAL_LDAP_GROUP_BASE", ""),
        "GROUP_FILTER": os.environ.get("GPUPORTAL_LDAP_GROUP_FILTER", "(objectClass=groupOfNames)"),
        # People under the user base who match this filter are disabled (e.g. "(pwdAccountLockedTime=*)" with
        # OpenLDAP's ppolicy, "(userAccountControl:1.2.840.113556.1.4.803:=2)" on Active Directory).
        "DISABLED_FILTER": os.environ.get("GPUPORTAL_LDAP_DISABLED_FILTER", ""),
        "CA_FILE": os.environ.get("GPUPORTAL_LDAP_CA_FILE", ""),
        "START_TLS": os.environ.get("GPUPORTAL_LDAP_START_TLS", "0") == "1",
        "TIMEOUT_SECONDS": float(os.environ.get("GPUPORTAL_LDAP_TIMEOUT", 5)),
    } if _LDAP_URI else None,
    "OIDC": {
        "ISSUER": _OIDC_ISSUER,
        "CLIENT_ID": os.environ.get("GPUPORTAL_OIDC_CLIENT_ID", ""),
        "CLIENT_SECRET": _directory_secret("GPUPORTAL_OIDC_CLIENT_SECRET_FILE"),
        "GROUPS_CLAIM": os.environ.get("GPUPORTAL_OIDC_GROUPS_CLAIM", "groups"),
        "SCOPES": os.environ.get("GPUPORTAL_OIDC_SCOPES", "openid email profile"),
        "PROVIDER_NAME": os.environ.get("GPUPORTAL_OIDC_PROVIDER_NAME", "OpenID Connect"),
        "CA_FILE": os.environ.get("GPUPORTAL_OIDC_CA_FILE", ""),
        "TIMEOUT_SECONDS": float(os.environ.get("GPUPORTAL_OIDC_TIMEOUT", 10)),
    } if _OIDC_ISSUER else None,
}
if DIRECTORY["LDAP"] and not DIRECTORY["LDAP"]["USER_BASE"]:
    raise ImproperlyConfigured("GPUPORTAL_LDAP_USER_BASE must be set with GPUPORTAL_LDAP_URI")
if DIRECTORY["OIDC"] and not DIRECTORY["OIDC"]["CLIENT_ID"]:
    raise ImproperlyConfigured("GPUPORTAL_OIDC_CLIENT_ID must be set with GPUPORTAL_OIDC_ISSUER")
AUTHENTICATION_BACKENDS = [
    "accounts.lockout.LockoutBackend",  # the lockout check stays first
    *(["directory.ldap_auth.LDAPDirectoryBackend"] if DIRECTORY["LDAP"] else []),
    *(["directory.oidc_auth.OIDCDirectoryBackend"] if DIRECTORY["OIDC"] else []),
    "django.contrib.auth.backends.ModelBackend" if DIRECTORY["LOCAL_LOGIN"] else "directory.local.BreakGlassBackend",
]
# --- end of directory sign-in -------------------------------------------------------------------------------

# --- Workloads on an origin of their own --------------------------------------------------------------------
# Notebooks and services are served only on GPUPORTAL_WORKLOAD_ORIGIN (scheme://host[:port]), never on the portal's
# own origin, so that nothing a tenant put in a workload runs as the portal (scheduling/workloads/origin.py): a host
# name of its own, outside the portal's cookie domain; "https://*.apps.example.org" gives each workload a host of
# its own (a wildcard DNS name and certificate). The embedded demo serves them on a second port. Without one
# (the production default), notebooks and services cannot be opened. The host joins ALLOWED_HOSTS.
from urllib.parse import urlsplit as _urlsplit  # noqa: E402 - this block's own

_WORKLOAD_ORIGIN = os.environ.get("GPUPORTAL_WORKLOAD_ORIGIN", "" if PRODUCTION else "http://127.0.0.1:8001")
WORKLOADS = {
    "ORIGIN": _WORKLOAD_ORIGIN.rstrip("/"),
    # The sign-in ticket's lifetime (it is good for one use) and the workload cookie's.
    "TICKET_SECONDS": int(os.environ.get("GPUPORTAL_WORKLOAD_TICKET_SECONDS", 60)),
    "COOKIE_MAX_AGE": int(float(os.environ.get("GPUPORTAL_WORKLOAD_COOKIE_HOURS", 12)) * 3600),
    # What an ingress's auth subrequest sends in X-Gpuportal-Ingress-Auth to be given a notebook's token, from a
    # file; empty: no ingress is given one.
    "INGRESS_AUTH_SECRET": _directory_secret("GPUPORTAL_INGRESS_AUTH_SECRET_FILE"),
}
if WORKLOADS["ORIGIN"]:
    _workload = _urlsplit(WORKLOADS["ORIGIN"])
    if (_workload.scheme not in ("http", "https") or not _workload.hostname or _workload.path or _workload.query
            or "*" in _workload.hostname.removeprefix("*.")):
        raise ImproperlyConfigured("GPUPORTAL_WORKLOAD_ORIGIN must be scheme://host[:port] (http or https, no path), "
                                   "e.g. https://apps.portal.example.org or https://*.apps.portal.example.org")
    _workload_hosts = _workload.hostname.removeprefix("*")  # ".apps.example.org" allows each workload's host
    _portal_cookie_domains = [d.lstrip(".") for d in (globals().get("SESSION_COOKIE_DOMAIN"),
                                                      globals().get("CSRF_COOKIE_DOMAIN")) if d]
    if PRODUCTION and (_workload_hosts.lstrip(".") == (_urlsplit(PORTAL_URL).hostname or "")
                       or any(_workload_hosts.endswith(d) for d in _portal_cookie_domains)):
        # Cookies ignore ports and follow their domain: the portal's CSRF cookie would be readable there.
        raise ImproperlyConfigured("GPUPORTAL_WORKLOAD_ORIGIN must have a host name of its own, neither the "
                                   "portal's (GPUPORTAL_URL) nor one under the portal's cookie domain")
    if _workload_hosts not in ALLOWED_HOSTS and "*" not in ALLOWED_HOSTS:
        ALLOWED_HOSTS = [*ALLOWED_HOSTS, _workload_hosts]
MIDDLEWARE.insert(MIDDLEWARE.index("whitenoise.middleware.WhiteNoiseMiddleware"),
                  "scheduling.workloads.origin.WorkloadOriginMiddleware")
# --- end of workloads on an origin of their own -------------------------------------------------------------
