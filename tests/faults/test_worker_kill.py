"""SIGKILL of a real Celery worker (Redis broker, late acks) mid-pass and mid-dispatch.

Mid-pass: another session holds one queued job's row, so the worker's pass is provably inside its apply step
when it is killed; nothing of it commits, and the next worker gets the same message again (Redis hands back an
unacknowledged message after the visibility timeout, two seconds for these workers). Mid-dispatch: the fake
API server holds the object creations of the dispatch batch until the worker is dead; the objects then appear
on the cluster, the jobs are still ``admitted``, and the redelivered batch (or the reconciler) finishes them
without a duplicate."""

import threading
from unittest import mock

import psycopg
import pytest
from django.db import connection

from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import Worker, broker_client, check_invariants, found, record, wait_for
from tests.scheduling.kube import MODEL

pytestmark = [pytest.mark.faults, pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]
JOBS = 20  # of 2 GPUs on 32: 16 are admitted, 4 wait


def other_session(autocommit=False):
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"],
                           autocommit=autocommit)


def waiting_backends(session) -> list[int]:
    """Backends of this database waiting for a row lock (the killed worker's pass)."""
    return [pid for (pid,) in session.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")]


def test_worker_sigkill_mid_pass_and_mid_dispatch(kube, users):
    submitted = {}
    with mock.patch("scheduling.jobs.submission.request_scheduling_pass"):  # leave every pass to the workers
        for i in range(JOBS):
            user, tenant, project = (("alice", "vision", "detection"), ("bob", "nlp", "llm-pretrain"))[i % 2]
            job = submission.submit_job(users[user], job_payload(tenant=tenant, project=project, gpu_model=MODEL,
                                                                 gpus_per_node=2, command=long_run(999)))
            submitted[f"job-{i}"] = [job.pk]
    client = broker_client()
    workers = []
    fake, create = kube.fake, kube.fake.create
    creating, hold = threading.Event(), threading.Event()

    def held_create(plural, namespace, body):  # the dispatch batch is in flight until the test lets it go
        if plural == "jobs":
            creating.set()
            hold.wait(30)
        return create(plural, namespace, body)

    try:
        # 1. mid-pass: the pass blocks on a row this session holds; the worker dies there
        with other_session() as locker, other_session(autocommit=True) as watcher:  # watcher: fresh stats
            locker.execute("SELECT id FROM scheduling_job WHERE id = %s FOR UPDATE", [submitted["job-0"][0]])
            first = Worker("faults-a").wait_ready()
            workers.append(first)
            client.send_task("scheduling.tasks.run_scheduling_pass")
            pid = wait_for(lambda: waiting_backends(watcher), 30, "the pass to block inside its apply step")[0]
            first.kill()
            locker.rollback()
            wait_for(lambda: pid not in [p for (p,) in watcher.execute("SELECT pid FROM pg_stat_activity")], 30,
                     "the dead worker's backend to end (its transaction rolls back)")
        assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.QUEUED}  # nothing half-applied

        # 2. mid-dispatch: the next worker gets the pass again, admits, and dies while dispatching
        with mock.patch.object(fake, "create", side_effect=held_create):
            second = Worker("faults-b").wait_ready()
            workers.append(second)
            assert creating.wait(40), "the pass was not redelivered to the next worker"
            admitted = Job.objects.filter(status=JobStatus.ADMITTED).count()
            second.kill()
            hold.set()  # the creations the dead worker asked for complete on the cluster
        assert admitted == 16 and Job.objects.filter(status=JobStatus.QUEUED).count() == JOBS - 16
        assert not Job.objects.filter(status=JobStatus.DISPATCHING).exists()

        # 3. a third worker gets the dispatch batch again: the objects exist (409), the jobs move on
        third = Worker("faults-c").wait_ready()
        workers.append(third)
        redelivered = wait_for(lambda: Job.objects.filter(status=JobStatus.DISPATCHING).count() == 16, 40,
                               "the dispatch batch to be redelivered")
    finally:
        hold.set()
        for worker in workers:
            worker.stop()
        client.close()
    tasks = {"pass": second.received("scheduling.tasks.run_scheduling_pass"),
             "dispatch": third.received("scheduling.tasks.dispatch_jobs")}
    assert tasks == {"pass": 1, "dispatch": 1} and redelivered
    result = check_invariants(submitted=submitted)
    record(f"worker SIGKILL mid-pass and mid-dispatch: {JOBS} jobs, 3 workers, 2 killed; redelivered 1 pass and "
           f"1 dispatch batch (late acks, 2 s visibility timeout); " + found(result))
