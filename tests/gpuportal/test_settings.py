"""Production settings fail fast; the embedded default needs nothing."""

import os
import subprocess
import sys

CHECK = ("import django; django.setup(); from django.conf import settings; "
         "print(settings.DATABASES['default']['ENGINE'])")


def run(env):
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SECRET_KEY", "CELERY_BROKER_URL",
                                                             "ALLOWED_HOSTS", "GPUPORTAL_ENV"}}
    return subprocess.run([sys.executable, "-c", CHECK], env={**base, "DJANGO_SETTINGS_MODULE": "gpuportal.settings",
                                                            **env}, capture_output=True, text=True, timeout=60)


def test_embedded_default_is_sqlite_without_a_broker():
    result = run({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.db.backends.sqlite3"


def test_production_refuses_to_start_without_its_settings():
    result = run({"GPUPORTAL_ENV": "production"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when GPUPORTAL_ENV=production" in result.stderr


def test_production_with_everything_set_starts():
    result = run({"GPUPORTAL_ENV": "production", "SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "portal.example",
                  "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/gpuportal",
                  "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.db.backends.postgresql"
