"""Celery: how tasks are acknowledged, limited and routed. The broker, and whether tasks run in-process instead,
is each profile's choice (embedded.py, production.py, test.py); the beat schedule is in gpuportal/celery.py.

Reliability: a task is acknowledged only once it has run, and given back to the queue when its worker dies
(every task is idempotent); publishing gives up fast when the broker is down (the reconciler and the next beat
tick pick the work up), so a request never hangs on it."""

from django.core.exceptions import ImproperlyConfigured

from gpuportal.settings.environment import env_float
from gpuportal.settings.scheduling import KUBERNETES

CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("GPUPORTAL_BROKER_TIMEOUT", 2)
# A message stays in Redis, unacknowledged, while its task runs. When the worker dies (SIGKILL, OOM, a lost
# node) Redis hands it to another worker once it has been unacknowledged for the visibility timeout (kombu's
# default: an hour); workers look for such messages every 10 s. So every task has a time limit below that
# timeout: a task still running when it ran out would be handed out again and run twice at once, and start-up
# refuses a configuration that breaks the rule (below). Long work raises GPUPORTAL_VISIBILITY_TIMEOUT together
# with GPUPORTAL_TASK_TIME_LIMIT; one Redis database has one timeout for every queue, since any worker restores
# any queue's messages.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_float("GPUPORTAL_VISIBILITY_TIMEOUT", 100),
    "unacked_restore_interval": 10,
    "unacked_restore_throttle": 1,  # scan at every interval (kombu's default scans every tenth)
    "unacked_mutex_expire": 30,  # a worker killed during a scan blocks the next ones this long, not 5 minutes
}
# Hard limit (the worker process running the task is killed) and soft limit (the task gets an exception and
# its transaction rolls back first). A pass, a dispatch batch, a rollup or a poll cycle takes seconds.
CELERY_TASK_TIME_LIMIT = env_float("GPUPORTAL_TASK_TIME_LIMIT", 75)
CELERY_TASK_SOFT_TIME_LIMIT = 0.9 * CELERY_TASK_TIME_LIMIT
# The watch follows pod events for KUBERNETES["WATCH_SECONDS"], so its limits follow that setting.
CELERY_TASK_ANNOTATIONS = {"scheduling.tasks.watch_kubernetes": {
    "soft_time_limit": KUBERNETES["WATCH_SECONDS"] + 10, "time_limit": KUBERNETES["WATCH_SECONDS"] + 15}}
# Polling runs on its own queue ("agents") so that slow agents never delay the pass, dispatch or sync:
# production runs `celery -A gpuportal worker -Q agents` beside the default worker (eager mode ignores it).
CELERY_TASK_ROUTES = {"fleet.tasks.poll_agents": {"queue": "agents"}}
# Beat touches its liveness file on every tick (manage.py liveness beat).
CELERY_BEAT_SCHEDULER = "gpuportal.observability.liveness:LivenessScheduler"


def _check_task_time_limits() -> None:
    """Refuse to start with a task whose time limit is not below the broker's visibility timeout: such a task,
    still running when the timeout ran out, would be handed to a second worker and run twice at once."""
    visibility = CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    limits = {"default": (CELERY_TASK_SOFT_TIME_LIMIT, CELERY_TASK_TIME_LIMIT)}
    for name, given in CELERY_TASK_ANNOTATIONS.items():
        limits[name] = (given.get("soft_time_limit", CELERY_TASK_SOFT_TIME_LIMIT),
                        given.get("time_limit", CELERY_TASK_TIME_LIMIT))
    for task, (soft, hard) in limits.items():
        if not 0 < soft < hard < visibility:
            raise ImproperlyConfigured(
                f"Celery task time limits ({task}: soft {soft:g} s, hard {hard:g} s) must be positive, the soft one "
                f"below the hard one and both below the broker's visibility timeout ({visibility:g} s): raise "
                "GPUPORTAL_VISIBILITY_TIMEOUT, or lower GPUPORTAL_TASK_TIME_LIMIT (or GPUPORTAL_K8S_WATCH_SECONDS)")


_check_task_time_limits()
