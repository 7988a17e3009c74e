"""Test settings: the real PostgreSQL server of this machine (TEST_DATABASE_URL to change it), Celery
eager unless a test starts a worker of its own, fast password hashing."""

import os

import dj_database_url

from .settings import *  # noqa: F403
from .settings import REST_FRAMEWORK, SCHEDULER

DATABASES = {"default": dj_database_url.parse(
    os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal"), conn_max_age=0)}
# Audit: the audit tables refuse TRUNCATE (a trigger); tests flush every table between tests, which a
# superuser session may do only after saying so with this setting (see audit/migrations/0004_refuse_truncate.py).
DATABASES["default"]["OPTIONS"] = {"options": "-c gpuportal.audit_allow_truncate=on"}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://localhost/"
CELERY_RESULT_BACKEND = None
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SCHEDULER = {**SCHEDULER, "MAX_RUNTIME_MINUTES": 7 * 24 * 60}
SIMULATION_TIME_SCALE = 0.02
# Sign-in and API tokens: API throttles out of the tests' way (tests/accounts sets its own).
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "100000/min", "user": "100000/min"}}
