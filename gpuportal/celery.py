"""The Celery app and its beat schedule.

The schedule is declared here, in code, so that production beat and the embedded scheduler loop
(`manage.py scheduler_loop`, which runs the same entries in-process when there is no broker) agree.
"""

import os

from celery import Celery
from celery.signals import task_prerun

from gpuportal.observability.liveness import WorkerLiveness
from gpuportal.observability.logs import log_tenant, log_user, request_id

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings")

app = Celery("gpuportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.steps["worker"].add(WorkerLiveness)  # manage.py liveness worker (gpuportal.observability.liveness)


@task_prerun.connect
def _log_context(task_id=None, task=None, **kwargs):
    """Log lines written by a task carry its id as their request id (gpuportal.observability.logs). A task run eagerly,
    inside a request, keeps the request's context."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    request_id.set(task_id or "-")
    log_user.set("-")
    log_tenant.set("-")


def _interval(name: str, default: float) -> float:
    from django.conf import settings

    return float(settings.SCHEDULER.get(name, default))


def beat_schedule() -> dict:
    from django.conf import settings

    return {
        # on the "agents" queue (CELERY_TASK_ROUTES); a tick not started within its interval is dropped, so a
        # stopped agents worker does not come back to a backlog of cycles
        "poll-agents": {"task": "fleet.tasks.poll_agents", "schedule": _interval("POLL_INTERVAL_SECONDS", 15),
                        "options": {"expires": _interval("POLL_INTERVAL_SECONDS", 15)}},
        "scheduling-pass": {
            "task": "scheduling.tasks.run_scheduling_pass",
            "schedule": _interval("PASS_INTERVAL_SECONDS", 10),
        },
        "rollup-usage": {"task": "metering.tasks.rollup_recent",
                         "schedule": float(settings.METERING["ROLLUP_INTERVAL_SECONDS"])},
        "freeze-closed-months": {"task": "metering.tasks.freeze_last_month", "schedule": 6 * 3600},
        # Slurm clusters' own accounting (slurmdb), as often as the usage rollup: the reports read both.
        "import-slurm-accounting": {"task": "metering.tasks.import_slurm_accounting",
                                    "schedule": float(settings.METERING["ROLLUP_INTERVAL_SECONDS"])},
        "expire-requests": {"task": "governance.tasks.expire_requests", "schedule": 600},
        "resend-unsent-mail": {"task": "governance.tasks.resend_unsent_mail", "schedule": 600},
        "check-idle-jobs": {"task": "governance.tasks.check_idle_jobs",
                            "schedule": float(settings.GOVERNANCE["IDLE_CHECK_INTERVAL_SECONDS"])},
        "watch-kubernetes": {"task": "scheduling.tasks.watch_kubernetes",
                             "schedule": float(settings.KUBERNETES["WATCH_SECONDS"]) + 2},
        "resync-kubernetes": {"task": "scheduling.tasks.resync_kubernetes", "schedule": 60},
        "prune-idempotency-keys": {"task": "gpuportal.tasks.prune_idempotency_records", "schedule": 3600},
        "reconcile": {"task": "scheduling.tasks.reconcile",
                      "schedule": float(settings.RECONCILE["INTERVAL_SECONDS"])},
        "prune-readings": {"task": "fleet.tasks.prune_readings", "schedule": 6 * 3600},
        # Slurm clusters: nodes, their states and reasons, and the work submitted to Slurm directly.
        "sync-slurm-inventory": {"task": "scheduling.tasks.sync_slurm_inventory",
                                 "schedule": float(settings.SLURM["INVENTORY_SECONDS"])},
        "sync-job-status": {
            "task": "scheduling.tasks.sync_job_status",
            "schedule": _interval("SYNC_INTERVAL_SECONDS", 5),
        },
        # Audit: the chain head, appended to a file the database cannot reach (audit.heads).
        "export-audit-head": {"task": "audit.tasks.export_head",
                              "schedule": float(settings.AUDIT["HEAD_EXPORT_INTERVAL_SECONDS"])},
        # Directory sign-in: memberships and disabled people brought in line with LDAP (a no-op
        # without GPUPORTAL_LDAP_URI).
        "sync-directory": {"task": "directory.tasks.sync_directory",
                           "schedule": float(settings.DIRECTORY["SYNC_INTERVAL_SECONDS"])},
    }


@app.on_after_finalize.connect
def _install_beat_schedule(sender, **kwargs):
    sender.conf.beat_schedule = beat_schedule()
