"""The one way to ask for Celery work from a service: ``request_scheduling_pass``, and ``send`` for any task.

A leaf: it names tasks by their registered names and imports no service, no model and not ``tasks.py``.
The services that ask for a pass (submission, job actions, workloads, governance) are what the tasks call,
so if they imported the tasks the two would import each other in a loop.

Queuing gives up fast when the broker is down (``send``): nothing is lost, the beat's next pass and the
reconciler pick the work up, so a request never fails or hangs on it. In the embedded mode (no broker, tasks
run eagerly) the task runs inline, in this process, as soon as it is queued.
"""

from __future__ import annotations

import logging
from importlib import import_module

import kombu.exceptions
from celery import current_app
from django.db import transaction

from gpuportal.observability import telemetry

logger = logging.getLogger(__name__)

#: The tasks this module queues, by their registered names (functions of ``scheduling/tasks.py``).
RUN_SCHEDULING_PASS = "scheduling.tasks.run_scheduling_pass"
DISPATCH_JOBS = "scheduling.tasks.dispatch_jobs"

#: What publishing raises when the broker cannot take a message (connection refused, timed out, lost).
BROKER_ERRORS = (kombu.exceptions.OperationalError, ConnectionError, TimeoutError)


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
    transaction.on_commit(lambda: send(RUN_SCHEDULING_PASS))
