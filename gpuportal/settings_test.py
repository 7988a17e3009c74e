"""Test settings: the real PostgreSQL server of this machine (TEST_DATABASE_URL to change it), Celery
eager unless a test starts a worker of its own, fast password hashing."""

import os

import dj_database_url

from .settings import *  # noqa: F403
from .settings import SCHEDULER

DATABASES = {"default": dj_database_url.parse(
    os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal"), conn_max_age=0)}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://localhost/"
CELERY_RESULT_BACKEND = None
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SCHEDULER = {**SCHEDULER, "MAX_RUNTIME_MINUTES": 7 * 24 * 60}
SIMULATION_TIME_SCALE = 0.02
