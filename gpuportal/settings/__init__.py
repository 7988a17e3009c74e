"""The portal's settings, by topic, and the three profiles built from them.

* embedded (embedded.py, the default): SQLite under var/, no Redis, tasks in-process; what ``make demo`` runs.
* production (production.py, ``GPUPORTAL_ENV=production``): every value that must not be guessed is required.
* test (test.py, ``DJANGO_SETTINGS_MODULE=gpuportal.settings.test``): the test suite's.

``DJANGO_SETTINGS_MODULE=gpuportal.settings`` (manage.py's, wsgi.py's and Celery's default, and the images')
is production when ``GPUPORTAL_ENV=production`` and embedded otherwise, so that one variable chooses, as the
deployment files expect. Every value the environment gives is read through environment.py; every setting is
bound in one place (tests/gpuportal/test_settings_layout.py checks both)."""

from gpuportal.settings.environment import env_str

if env_str("GPUPORTAL_ENV", "embedded") == "production":
    from gpuportal.settings.production import *  # noqa: F403
else:
    from gpuportal.settings.embedded import *  # noqa: F403
