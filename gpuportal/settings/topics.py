"""Every topic module's settings, gathered: what each profile (development.py for the demo and the tests,
production.py) starts from before binding what is its own."""

from gpuportal.settings.api import *  # noqa: F403
from gpuportal.settings.base import *  # noqa: F403
from gpuportal.settings.cache import *  # noqa: F403
from gpuportal.settings.celery import *  # noqa: F403
from gpuportal.settings.directory import *  # noqa: F403
from gpuportal.settings.mail import *  # noqa: F403
from gpuportal.settings.metering import *  # noqa: F403
from gpuportal.settings.observability import *  # noqa: F403
from gpuportal.settings.scheduling import *  # noqa: F403
from gpuportal.settings.security import *  # noqa: F403
