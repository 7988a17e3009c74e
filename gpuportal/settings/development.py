"""What the development profiles share (the embedded demo and the test suite): a development key, DEBUG off
unless asked for, the demo's seed data and the benchmarks installed, static files served from the source tree,
text logs, and workloads on a second port of 127.0.0.1. The database and the broker are each one's own
(embedded.py, test.py)."""

from gpuportal.settings.audit import audit_settings
from gpuportal.settings.base import PORTAL_APPS, PORTAL_URL, QUIET_CHECKS
from gpuportal.settings.environment import env_bool, env_str, env_str_or_default, split_list
from gpuportal.settings.observability import logging_config
from gpuportal.settings.security import EMBEDDED_SECRET_KEY
from gpuportal.settings.topics import *  # noqa: F403
from gpuportal.settings.workloads import with_workload_host, workload_settings

ENVIRONMENT = "embedded"
SECRET_KEY = env_str_or_default("SECRET_KEY", EMBEDDED_SECRET_KEY)
# Off, as in production: the demo is what people try the portal on, and an unknown address or another tenant's
# job must show the portal's own 404 and 403 pages, not Django's technical page listing every URL pattern and
# setting. ``DEBUG=1`` turns the technical pages on for someone working on the code.
DEBUG = env_bool("DEBUG", False)
# The demo's seed data (manage.py seed_demo) and the benchmarks (manage.py bench_*, prod_smoke, chaos_soak,
# replay_trace) run from here; the production stack they start runs without them.
INSTALLED_APPS = [*PORTAL_APPS, "demo", "bench"]
# The source files as they are, without collectstatic (production serves collected, hashed files).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Served by whitenoise from the source tree whatever DEBUG says (runserver serves static files only with DEBUG
# on), looked up on each request: edited files show without a restart, and no collectstatic is needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
SILENCED_SYSTEM_CHECKS = QUIET_CHECKS
# Plain text: runserver already prints one line per request.
LOG_FORMAT = env_str("GPUPORTAL_LOG_FORMAT", "text")
LOGGING = logging_config(LOG_FORMAT)
# Celery keeps the logging configured above instead of installing its own text handler only for JSON logs.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
AUDIT = audit_settings(SECRET_KEY, production=False)
# Per-node agent tokens are derived from this secret (HMAC of node name and token version) and only their
# SHA-256 is stored, so a copy of the database does not reveal them.
AGENT_TOKEN_SECRET = env_str("GPUPORTAL_AGENT_TOKEN_SECRET", SECRET_KEY)
WORKLOADS = workload_settings("http://127.0.0.1:8001", portal_url=PORTAL_URL, separate_host=False)
ALLOWED_HOSTS = with_workload_host(split_list(env_str_or_default("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")),
                                   WORKLOADS)
