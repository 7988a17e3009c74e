"""A cancel storm during passes: researchers submit and cancel jobs 0-90 ms apart (over the API, in threads)
while scheduling passes and dispatches run back to back in another thread. No pass or dispatch may be aborted
for it, and the other tenants' jobs still get admitted."""

import random
import threading
import time
from unittest import mock

import pytest
from django.db import connections

from scheduling.models import ACTIVE_STATUSES, Job, JobStatus
from scheduling.passes.dispatch import dispatch_many
from scheduling.passes.scheduler import run_pass
from scheduling.tasks import run_scheduling_pass
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import check_invariants, found, record

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
ROUNDS = 8  # submit-then-cancel pairs per storming user


def test_a_cancel_storm_aborts_no_pass_and_starves_nobody(api, users):
    submitted: dict[str, list[int]] = {}
    clients = {name: api(name) for name in ("alice", "erin", "bob")}  # tokens first, outside the threads
    with mock.patch.object(run_scheduling_pass, "apply_async"):  # passes run only in the loop below
        for i in range(3):  # the bystanders: nlp's jobs, queued before the storm
            response = clients["bob"].post("/api/jobs/", job_payload(
                tenant="nlp", project="llm-pretrain", gpu_model="H100", gpus_per_node=4,
                command=long_run(999)), format="json")
            assert response.status_code == 201, response.content
            submitted[f"bob-{i}"] = [response.json()["id"]]
        storming = threading.Event()
        passes = {"ran": 0, "raised": [], "dispatch_raised": [], "admitted": 0}

        def pass_loop():
            try:
                while storming.is_set() or passes["ran"] < 2:
                    try:
                        report = run_pass()
                    except Exception as exc:  # what the storm must not cause
                        passes["raised"].append(repr(exc))
                        continue
                    passes["ran"] += report.ran
                    passes["admitted"] += len(report.admitted_ids)
                    try:
                        dispatch_many(report.admitted_ids)
                    except Exception as exc:
                        passes["dispatch_raised"].append(repr(exc))
            finally:
                connections.close_all()

        cancels = {"done": 0, "too_late": 0, "errors": []}

        def storm(name, tenant, project, seed):
            rng = random.Random(seed)
            try:
                for i in range(ROUNDS):
                    response = clients[name].post("/api/jobs/", job_payload(
                        tenant=tenant, project=project, gpu_model="A100", gpus_per_node=rng.choice((1, 2, 4)),
                        command=long_run(999)), format="json")
                    if response.status_code != 201:
                        cancels["errors"].append(response.content)
                        continue
                    job_id = response.json()["id"]
                    submitted[f"{name}-{i}"] = [job_id]
                    time.sleep(rng.uniform(0, 0.09))  # 0-90 ms between submitting and cancelling
                    answer = clients[name].post(f"/api/jobs/{job_id}/cancel/", {}, format="json")
                    if answer.status_code == 200:
                        cancels["done"] += 1
                    else:
                        cancels["errors"].append(answer.content)
            finally:
                connections.close_all()

        storming.set()
        loop = threading.Thread(target=pass_loop)
        loop.start()
        stormers = [threading.Thread(target=storm, args=args) for args in (
            ("alice", "vision", "detection", 1), ("erin", "speech", "asr", 2))]
        for thread in stormers:
            thread.start()
        for thread in stormers:
            thread.join(60)
        storming.clear()
        loop.join(60)
    assert not loop.is_alive() and not any(t.is_alive() for t in stormers)
    assert passes["raised"] == [] and passes["dispatch_raised"] == []  # no pass nor batch aborted by a cancel
    assert cancels["errors"] == [] and cancels["done"] == 2 * ROUNDS
    assert passes["ran"] >= 2
    bystanders = Job.objects.filter(pk__in=[submitted[f"bob-{i}"][0] for i in range(3)])
    assert {job.status for job in bystanders} <= set(ACTIVE_STATUSES)  # admitted despite the storm
    stormed = Job.objects.exclude(pk__in=[j.pk for j in bystanders])
    assert {job.status for job in stormed} == {JobStatus.CANCELLED}
    result = check_invariants(submitted=submitted)
    record(f"cancel storm: {2 * ROUNDS} submit+cancel pairs 0-90 ms apart over the API during {passes['ran']} "
           f"passes; passes raised {len(passes['raised'])}, dispatch batches raised {len(passes['dispatch_raised'])}"
           f", {bystanders.count()} bystander jobs admitted; " + found(result))
