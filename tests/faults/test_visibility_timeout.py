"""SIGKILL of a real Celery worker mid-task under the production settings' broker options (the visibility
timeout shortened through ``GPUPORTAL_VISIBILITY_TIMEOUT``, nothing else test-only): the message comes back to
the next worker once that timeout has run out, not after kombu's hour.

The other SIGKILL scenarios (test_worker_kill.py) run workers with test-only transport options
(worker_settings.py); this one shows that the options production runs with redeliver by themselves."""

import os
from unittest import mock

import pytest
import redis
from celery import Celery

from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run
from tests.faults import test_worker_kill as harness
from tests.faults.faultlib import Worker, check_invariants, found, record, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]
#: Its own Redis database: the suite's (13) is flushed by the other scenarios.
BROKER_URL = os.environ.get("GPUPORTAL_VISIBILITY_REDIS_URL", "redis://127.0.0.1:6379/6")
#: Production settings with a visibility timeout of seconds, and time limits below it as the settings demand.
SETTINGS = {"DJANGO_SETTINGS_MODULE": "gpuportal.settings", "CELERY_BROKER_URL": BROKER_URL,
            "CELERY_RESULT_BACKEND": BROKER_URL, "GPUPORTAL_VISIBILITY_TIMEOUT": "20",
            "GPUPORTAL_TASK_TIME_LIMIT": "15", "GPUPORTAL_K8S_WATCH_SECONDS": "1"}
JOBS = 4


def test_a_killed_workers_pass_is_handed_to_the_next_worker_after_the_visibility_timeout(users):
    submitted = {}
    with mock.patch("scheduling.jobs.submission.request_scheduling_pass"):  # leave every pass to the workers
        for i in range(JOBS):
            job = submission.submit_job(users["alice"], job_payload(gpu_model="A100", gpus_per_node=2,
                                                                    command=long_run(999)))
            submitted[f"job-{i}"] = [job.pk]
    redis.Redis.from_url(BROKER_URL).flushdb()
    client = Celery(broker=BROKER_URL, backend=BROKER_URL, set_as_current=False)
    workers = []
    try:
        # the pass blocks on a row another session holds; its worker dies there, its message unacknowledged
        with harness.other_session() as locker, harness.other_session(autocommit=True) as watcher:
            locker.execute("SELECT id FROM scheduling_job WHERE id = %s FOR UPDATE", [submitted["job-0"][0]])
            first = Worker("visibility-a", SETTINGS).wait_ready()
            workers.append(first)
            client.send_task("scheduling.tasks.run_scheduling_pass")
            pid = wait_for(lambda: harness.waiting_backends(watcher), 30, "the pass to block inside its apply step")[0]
            # the next worker starts now, while the message waits out its timeout: its start-up is not added to
            # the wait (nothing can reach it before the timeout, and the pass is reserved by the first one)
            second = Worker("visibility-b", SETTINGS)
            workers.append(second)
            first.kill()
            locker.rollback()
            wait_for(lambda: pid not in [p for (p,) in watcher.execute("SELECT pid FROM pg_stat_activity")], 30,
                     "the dead worker's backend to end (its transaction rolls back)")
        assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.QUEUED}  # nothing half-applied
        assert second.received("scheduling.tasks.run_scheduling_pass") == 0  # not before the timeout ran out

        second.wait_ready()
        # 20 s of visibility timeout and a sweep every 10 s; kombu's defaults would keep it for an hour
        wait_for(lambda: second.received("scheduling.tasks.run_scheduling_pass"), 60,
                 "the killed worker's pass to be handed out again")
        wait_for(lambda: not Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.ADMITTED)).exists(), 60,
                 "the redelivered pass to admit the queued jobs, and its follow-up to dispatch them")
    finally:
        for worker in workers:
            worker.stop()
        client.close()
    result = check_invariants(submitted=submitted)
    record(f"worker SIGKILL mid-pass under the production broker options (visibility timeout 20 s from "
           f"GPUPORTAL_VISIBILITY_TIMEOUT): the pass was handed to the next worker, which admitted and dispatched "
           f"{JOBS} jobs; " + found(result))
