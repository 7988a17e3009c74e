"""The Kubernetes API misbehaving in bursts: 5xx answers and timeouts during dispatch, 5xx during sync, and a
compacted history (410 Gone) under a running watch. Retries absorb short bursts, a long one fails only the jobs
it hit (with the cluster's message), a create that timed out but happened is taken as done (409), the watch
relists, and after a reconcile nothing is stuck."""

import threading
from unittest import mock

import pytest
from django.db import connections

from fleet.models import Cluster
from scheduling.executors.kubernetes.sync import ClusterSync
from scheduling.jobs import submission
from scheduling.models import ACTIVE_STATUSES, Job, JobStatus
from scheduling.tasks import dispatch_jobs
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import check_invariants, found, record
from tests.scheduling.kube import MODEL

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
JOBS = 12
SLOW = 3  # creates answered only after the client's timeout


def test_api_errors_timeouts_and_410_during_dispatch_and_sync(kube, users, settings):
    settings.KUBERNETES = {**settings.KUBERNETES, "REQUEST_TIMEOUT_SECONDS": 0.3}
    submitted = {}
    with mock.patch.object(dispatch_jobs, "apply_async"):  # one dispatch batch below, under the faults
        for i in range(JOBS):
            user, tenant, project = (("alice", "vision", "detection"), ("bob", "nlp", "llm-pretrain"))[i % 2]
            job = submission.submit_job(users[user], job_payload(tenant=tenant, project=project, gpu_model=MODEL,
                                                                 gpus_per_node=2, command=long_run(999)))
            submitted[f"job-{i}"] = [job.pk]
    admitted = list(Job.objects.filter(status=JobStatus.ADMITTED).values_list("pk", flat=True))
    assert len(admitted) == JOBS

    fake, create = kube.fake, kube.fake.create
    slowed = {"n": 0}
    lock = threading.Lock()

    def slow_create(plural, namespace, body):  # the object is made, but after the client gave up waiting
        if plural == "jobs":
            with lock:
                slowed["n"] += 1
                slow = slowed["n"] <= SLOW
            if slow:
                threading.Event().wait(0.6)
        return create(plural, namespace, body)

    fake.fail_next(6, code=503, method="POST", path="/jobs")  # a burst the retries absorb
    with mock.patch.object(fake, "create", side_effect=slow_create):
        first = dispatch_jobs.apply(args=[admitted[:JOBS // 2]]).get()
    fake.fail_next(3 * JOBS, code=500, method="POST", path="/jobs")  # a burst longer than every retry
    second = dispatch_jobs.apply(args=[admitted[JOBS // 2:]]).get()
    assert first["dispatched"] + first["failed"] == JOBS // 2
    assert second["failed"] == JOBS // 2  # each failed job says why; nobody else was rolled back
    failed = Job.objects.filter(status=JobStatus.FAILED)
    assert all("refused the job's objects" in job.failure_message for job in failed)

    dispatched = list(Job.objects.filter(status=JobStatus.DISPATCHING))
    assert dispatched  # the short burst and the timeouts did not fail everything
    fake.fail_next(2, code=502, method="GET", path="/pods")  # sync through a short burst of 5xx
    sync = ClusterSync(Cluster.objects.get(pk=kube.cluster.pk))
    synced = sync.resync()
    assert {job.status for job in Job.objects.filter(pk__in=[j.pk for j in dispatched])} == {JobStatus.RUNNING}
    finished = dispatched[0]
    fake.succeed(*kube.objects_of(finished))  # while nobody watches
    fake.compact()  # ... and the history of it is gone: the watch gets 410 Gone and lists again
    sync.listed = True
    watched = sync.watch(0.5)
    assert watched.relists == 1
    assert Job.objects.get(pk=finished.pk).status == JobStatus.SUCCEEDED  # seen through the new list
    connections.close_all()
    result = check_invariants(submitted=submitted)
    assert Job.objects.filter(status__in=ACTIVE_STATUSES).exclude(status=JobStatus.RUNNING).count() == 0
    record(f"Kubernetes API faults: {JOBS} jobs; dispatch through 6x 503 and {SLOW} creates answered after the "
           f"client timeout ({first['dispatched']} dispatched, {first['failed']} failed), then a 5xx burst longer "
           f"than the retries ({second['failed']} failed with the cluster's message); sync through 2x 502 "
           f"({synced.changed} changed) and a 410 (relists {watched.relists}); " + found(result))
