"""The embedded profile, what ``make demo`` runs: SQLite under var/, no Redis, Celery tasks run in the calling
process, a simulated cluster. A fresh machine needs nothing but Python.

``DATABASE_URL`` and ``CELERY_BROKER_URL`` may still point it at PostgreSQL and Redis (the benchmarks and the
production smoke do, to drive the production stack from here); with a broker, tasks go to it instead of running
in-process, unless ``CELERY_TASK_ALWAYS_EAGER=1``. Without one, the scheduler loop (``manage.py scheduler_loop``)
fires the beat schedule declared in gpuportal/celery.py itself."""

from gpuportal.settings.base import BASE_DIR, database
from gpuportal.settings.development import *  # noqa: F403
from gpuportal.settings.environment import env_bool, env_is_set, env_optional, env_str_or_default
from gpuportal.settings.security import PORTAL_PASSWORD_HASHERS
from gpuportal.settings.tuning import *  # noqa: F403

DATABASES = {"default": database(env_str_or_default("DATABASE_URL",
                                                    f"sqlite:///{BASE_DIR / 'var' / 'gpuportal.sqlite3'}"))}
CELERY_BROKER_URL = env_str_or_default("CELERY_BROKER_URL", "memory://localhost/")
CELERY_RESULT_BACKEND = env_optional("CELERY_RESULT_BACKEND")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", not env_is_set("CELERY_BROKER_URL"))
PASSWORD_HASHERS = PORTAL_PASSWORD_HASHERS
