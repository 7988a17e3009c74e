"""Settings of the fault suite's Celery workers: production-like settings (gpuportal.settings, configured by
the environment the test passes), plus a short Redis visibility timeout.

Why: with late acks, Redis gives a message whose worker died back to the queue only once it has been
unacknowledged for ``visibility_timeout`` (an hour by default); two seconds let a SIGKILL scenario watch the
redelivery instead of waiting an hour or leaving it all to the reconciler."""

from gpuportal.settings import *  # noqa: F403

CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 2, "unacked_restore_interval": 1,
                                   "unacked_restore_throttle": 1, "unacked_mutex_expire": 2}
