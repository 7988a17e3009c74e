"""The one way to ask for Celery work from a service: ``request_scheduling_pass``, and ``send`` for any task.

A leaf: it names tasks by their registered names and imports no service, no model and not ``tasks.py``.
The services that ask for a pass (submission, job actions, workloads, governance) are what the tasks call,
so if they imported the tasks the two would import each other in a loop.

Queuing gives up fast when the broker is down (``send``): nothing is lost, the beat's next pass and the
reconciler pick the work up, so a request never fails or hangs on it. In the embedded mode (no broker, tasks
run eagerly) the task runs inline, in this process, as soon as it is queued.

Requests for a pass are coalesced: under churn (dozens of submissions a second) one pass per request would keep
the worker running pass after pass, each reading what the one before had read. A pass reads the whole queue,
so one pass that has not started yet serves every request made before it starts: a request sets a key in the
broker's Redis (``SET NX`` with an expiry) and queues a pass only when it was the one that set it; the pass clears
the key when it starts, before it reads anything, so a change made after that asks for a pass of its own. The
key expires after one beat interval: a message the broker lost leaves a key that blocks requests that long at
most, and the beat's periodic pass, which runs whatever the key says, reads the change within that interval.
When the key cannot be read or set (Redis down) the request queues a pass as before.
"""

from __future__ import annotations

import logging
from functools import cache
from importlib import import_module

import kombu.exceptions
import redis
from celery import current_app
from django.conf import settings
from django.db import transaction

from gpuportal.observability import telemetry

logger = logging.getLogger(__name__)

#: The tasks this module queues, by their registered names (functions of ``scheduling/tasks.py``).
RUN_SCHEDULING_PASS = "scheduling.tasks.run_scheduling_pass"
DISPATCH_JOBS = "scheduling.tasks.dispatch_jobs"

#: What publishing raises when the broker cannot take a message (connection refused, timed out, lost).
BROKER_ERRORS = (kombu.exceptions.OperationalError, ConnectionError, TimeoutError)
#: The key, in the broker's Redis, that says a pass is queued and has not started yet.
PASS_QUEUED_KEY = "gpuportal:scheduling-pass-queued"


def _task(name: str):
    """The task registered as ``name``. A worker imports every tasks module at start; a web process may not
    have, and when tasks run eagerly the task itself must run here, so its module is imported (by name)
    the first time it is asked for."""
    if name not in current_app.tasks:
        import_module(name.rpartition(".")[0])
    return current_app.tasks[name]


def send(name: str, *args) -> bool:
    """Queue the task registered as ``name``; False, logged and counted, when the broker cannot take it.
    Nothing is lost then: the beat's next pass and the reconciler do the work (``tasks.reconcile``), so a
    caller never fails or hangs because the broker is down."""
    try:
        _task(name).apply_async(args=args, retry=False)
        return True
    except BROKER_ERRORS as exc:
        logger.warning("could not queue %s (%s); the next beat tick or the reconciler will do it", name, exc)
        telemetry.increment("gpuportal_enqueue_failures_total", task=name.rpartition(".")[2])
        return False


def request_scheduling_pass() -> None:
    """Ask for a pass once the current transaction commits (inline in the embedded mode)."""
    transaction.on_commit(queue_pass)


def queue_pass() -> bool:
    """Queue a pass unless one is queued and has not started (see the module); False when the broker could not
    take it."""
    marker = _marker()
    if marker is None:
        return send(RUN_SCHEDULING_PASS)  # tasks run here, or the broker is not Redis: every request queues
    try:
        if not marker.set(PASS_QUEUED_KEY, 1, nx=True, ex=_expiry()):
            return True  # the queued pass has not started: it will read this change
    except redis.RedisError as exc:
        logger.warning("could not mark a queued scheduling pass (%s); queuing one anyway", exc)
        return send(RUN_SCHEDULING_PASS)
    if send(RUN_SCHEDULING_PASS):
        return True
    pass_started()  # nothing was queued: the next request may try again
    return False


def pass_started() -> None:
    """A pass is starting, before it reads anything: a request from now on queues the next one."""
    marker = _marker()
    if marker is None:
        return
    try:
        marker.delete(PASS_QUEUED_KEY)
    except redis.RedisError as exc:  # the key expires by itself within one beat interval
        logger.warning("could not clear the queued scheduling pass mark (%s)", exc)


def _expiry() -> int:
    return max(1, round(settings.SCHEDULER["PASS_INTERVAL_SECONDS"]))


def _marker() -> redis.Redis | None:
    """The broker's Redis, where the mark of a queued pass lives; None when tasks run in this process or the
    broker is something else."""
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return None
    return _client(getattr(settings, "CELERY_BROKER_URL", "") or "")


@cache
def _client(url: str) -> redis.Redis | None:
    if not url.startswith(("redis://", "rediss://")):
        return None
    timeout = getattr(settings, "CELERY_BROKER_CONNECTION_TIMEOUT", 2)
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
