"""The test suite's profile (pyproject.toml's ``DJANGO_SETTINGS_MODULE``): the embedded profile's choices on this
machine's real PostgreSQL (``TEST_DATABASE_URL`` to change it), Celery eager unless a test starts a worker of its
own, fast password hashing, and fixed values where a variable left in a developer's shell would change what the
tests see (tuning.py)."""

import dj_database_url

from gpuportal.settings.api import rest_framework
from gpuportal.settings.base import DEFAULT_PREPARE_AFTER, postgresql_options
from gpuportal.settings.development import *  # noqa: F403
from gpuportal.settings.environment import env_str
from gpuportal.settings.scheduling import DEFAULT_MAX_RUNTIME_MINUTES, DEFAULT_SIMULATION_TIME_SCALE, scheduler

DATABASES = {"default": {
    **dj_database_url.parse(env_str("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal"),
                            conn_max_age=0),
    # The audit tables refuse TRUNCATE (a trigger); tests flush every table between tests, which a superuser
    # session may do only after saying so with this setting (audit/migrations/0004_refuse_truncate.py).
    "OPTIONS": {"options": "-c gpuportal.audit_allow_truncate=on", **postgresql_options(DEFAULT_PREPARE_AFTER)},
}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://localhost/"
CELERY_RESULT_BACKEND = None
# The Redis database of the tests that start a Celery worker of their own.
TEST_REDIS_URL = env_str("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SCHEDULER = scheduler(DEFAULT_MAX_RUNTIME_MINUTES)
SIMULATION_TIME_SCALE = DEFAULT_SIMULATION_TIME_SCALE
# API throttles out of the tests' way (tests/accounts sets its own).
REST_FRAMEWORK = rest_framework({"anon": "100000/min", "user": "100000/min"})
