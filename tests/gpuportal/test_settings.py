"""Production settings fail fast; the embedded default needs nothing."""

import os
import subprocess
import sys

import pytest

CHECK = ("import django; django.setup(); from django.conf import settings; "
         "print(settings.DATABASES['default']['ENGINE'])")


def _base():
    """This process's environment without anything the production settings read."""
    return {k: v for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "SECRET_KEY", "CELERY_BROKER_URL", "ALLOWED_HOSTS", "GPUPORTAL_ENV", "DEBUG",
                         "HTTPS"} and not k.startswith("GPUPORTAL_")}


def run(env, code=CHECK, module="gpuportal.settings"):
    """``code`` in a fresh process on the settings ``module`` with ``env``, and nothing else of this test run's."""
    return subprocess.run([sys.executable, "-c", code], env={**_base(), "DJANGO_SETTINGS_MODULE": module, **env},
                          capture_output=True, text=True, timeout=60)


def test_embedded_default_is_sqlite_without_a_broker():
    result = run({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.db.backends.sqlite3"


def test_production_refuses_to_start_without_its_settings():
    result = run({"GPUPORTAL_ENV": "production"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when GPUPORTAL_ENV=production" in result.stderr


STRONG_KEY = "Zq8-vL2_pX4mK7rT" * 4
PRODUCTION = {"GPUPORTAL_ENV": "production", "SECRET_KEY": STRONG_KEY, "ALLOWED_HOSTS": "portal.example",
              "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/gpuportal",
              "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0", "GPUPORTAL_AUDIT_KEY": "a-test-audit-chain-key-" * 2,
              "GPUPORTAL_AUDIT_HEAD_FILE": "/var/log/gpuportal/audit-heads.jsonl"}


def test_production_with_everything_set_starts():
    result = run(PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.db.backends.postgresql"


@pytest.mark.parametrize(("override", "message"), [
    ({"DEBUG": "1"}, "DEBUG must be off"),
    ({"SECRET_KEY": "Zq8-vL2_pX4mK7rT"}, "SECRET_KEY is weak"),
    ({"SECRET_KEY": "ab" * 40}, "SECRET_KEY is weak"),
    ({"SECRET_KEY": "django-insecure-" + STRONG_KEY}, "SECRET_KEY is weak"),
    ({"SECRET_KEY": "embedded-demo-key-not-for-production"}, "SECRET_KEY is weak"),
    ({"HTTPS": "0"}, "GPUPORTAL_ALLOW_HTTP=1"),
])
def test_production_refuses_debug_weak_keys_and_insecure_cookies(override, message):
    result = run({**PRODUCTION, **override})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr


def test_a_lab_without_tls_must_say_so():
    result = run({**PRODUCTION, "HTTPS": "0", "GPUPORTAL_ALLOW_HTTP": "1"})
    assert result.returncode == 0, result.stderr


def test_production_passes_the_deploy_check_without_a_warning():
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            env={**_base(), "DJANGO_SETTINGS_MODULE": "gpuportal.settings", **PRODUCTION},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr and "System check identified no issues" in result.stdout


def test_production_security_headers_and_the_proxy_header_only_when_trusted():
    show = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
            "s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.X_FRAME_OPTIONS, "
            "s.SECURE_PROXY_SSL_HEADER)")
    plain = run(PRODUCTION, code=show)
    assert plain.stdout.split() == ["31536000", "True", "False", "True", "True", "True", "DENY", "None"], plain.stderr
    proxied = run({**PRODUCTION, "GPUPORTAL_TRUSTED_PROXY_HEADER": "1"}, code=show)
    assert "('HTTP_X_FORWARDED_PROTO', 'https')" in proxied.stdout, proxied.stderr
