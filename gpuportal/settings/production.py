"""The production profile (``GPUPORTAL_ENV=production``).

Every value that must not be guessed (``SECRET_KEY``, ``DATABASE_URL``, ``CELERY_BROKER_URL``, ``ALLOWED_HOSTS``,
the audit key and its anchor) is required, and start-up fails fast naming the missing variable instead of
falling back to a demo default. It refuses to run with settings an attacker can use: DEBUG pages leak settings
and code, a weak key forges sessions and agent tokens, cookies sent over plain HTTP can be stolen. The demo's
seed data and the benchmarks are not installed."""

from django.core.exceptions import ImproperlyConfigured

from gpuportal.settings.audit import audit_settings
from gpuportal.settings.base import PORTAL_APPS, PORTAL_URL, QUIET_CHECKS, database
from gpuportal.settings.environment import env_bool, env_int, env_list, env_required, env_str, split_list
from gpuportal.settings.observability import logging_config
from gpuportal.settings.security import EMBEDDED_SECRET_KEY, PORTAL_PASSWORD_HASHERS
from gpuportal.settings.topics import *  # noqa: F403
from gpuportal.settings.tuning import *  # noqa: F403
from gpuportal.settings.workloads import with_workload_host, workload_settings

ENVIRONMENT = "production"
SECRET_KEY = env_required("SECRET_KEY")
DEBUG = env_bool("DEBUG", False)
PASSWORD_HASHERS = PORTAL_PASSWORD_HASHERS
_HOSTS = split_list(env_required("ALLOWED_HOSTS"))
DATABASES = {"default": database(env_required("DATABASE_URL"))}
CELERY_BROKER_URL = env_required("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", CELERY_BROKER_URL)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
INSTALLED_APPS = PORTAL_APPS
# What `manage.py collectstatic` wrote (whitenoise): names with a hash of the content, cached by browsers for ten
# years without asking again (Cache-Control: immutable), and gzip copies (plotly.js travels as 0.4 MB instead of
# 1.2). Templates then need the manifest, so collectstatic must run before the server starts.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# JSON lines on stdout, each with the request id, user and tenant (gpuportal.observability.logs), for the site's
# log collector.
LOG_FORMAT = env_str("GPUPORTAL_LOG_FORMAT", "json")
LOGGING = logging_config(LOG_FORMAT)
# Celery keeps the logging configured above instead of installing its own text handler only for JSON logs.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
AUDIT = audit_settings(SECRET_KEY, production=True)
# Per-node agent tokens are derived from this secret (HMAC of node name and token version) and only their
# SHA-256 is stored, so a copy of the database does not reveal them.
AGENT_TOKEN_SECRET = env_str("GPUPORTAL_AGENT_TOKEN_SECRET", SECRET_KEY)

if DEBUG:
    raise ImproperlyConfigured("DEBUG must be off when GPUPORTAL_ENV=production (unset DEBUG or set DEBUG=0)")
if (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure-")
        or SECRET_KEY == EMBEDDED_SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY is weak: give at least 50 characters, at least 5 distinct, not the django-insecure- "
        "prefix nor the embedded default (python -c 'import secrets; print(secrets.token_urlsafe(64))')")

SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("HTTPS", True)
# A lab without TLS must say so: cookies then travel in clear text, and nothing is redirected to HTTPS.
ALLOW_HTTP = env_bool("GPUPORTAL_ALLOW_HTTP", False)
if not SESSION_COOKIE_SECURE and not ALLOW_HTTP:
    raise ImproperlyConfigured("HTTPS=0 sends session and CSRF cookies in clear text; set "
                               "GPUPORTAL_ALLOW_HTTP=1 to accept that for a lab without TLS")
SECURE_SSL_REDIRECT = not ALLOW_HTTP
# Paths served over plain HTTP inside the cluster (regular expressions, no leading slash).
SECURE_REDIRECT_EXEMPT = [] if ALLOW_HTTP else env_list("GPUPORTAL_SSL_REDIRECT_EXEMPT")
SECURE_HSTS_SECONDS = 0 if ALLOW_HTTP else env_int("GPUPORTAL_HSTS_SECONDS", 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not ALLOW_HTTP and env_bool("GPUPORTAL_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = not ALLOW_HTTP and env_bool("GPUPORTAL_HSTS_PRELOAD", False)
# Preloading is a commitment to HTTPS for every subdomain, for months, that only the site's owner can make: it
# stays off by default, so the deploy check's reminder about it is silenced.
SILENCED_SYSTEM_CHECKS = [*QUIET_CHECKS, *([] if ALLOW_HTTP or SECURE_HSTS_PRELOAD else ["security.W021"])]
# Only behind a proxy that always sets (and never passes on) X-Forwarded-Proto.
SECURE_PROXY_SSL_HEADER = (("HTTP_X_FORWARDED_PROTO", "https") if env_bool("GPUPORTAL_TRUSTED_PROXY_HEADER", False)
                           else None)

# No default origin: without one, notebooks and services cannot be opened; with one, it must not share the
# portal's host name.
WORKLOADS = workload_settings("", portal_url=PORTAL_URL, separate_host=True)
ALLOWED_HOSTS = with_workload_host(_HOSTS, WORKLOADS)
