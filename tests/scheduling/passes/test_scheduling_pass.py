"""The pass on the database: preemption records, holds, reservations, the queue page, atomicity, the lock."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduling.jobs import submission
from scheduling.models import Job, JobStatus, Reservation
from scheduling.passes.scheduler import PASS_LOCK_KEY, run_pass
from tenants.models import Tenant
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def fill_h100_with_research(users):
    """Four preemptible research jobs of vision fill the H100 nodes (vision may borrow up to 16, nlp's
    guarantee is 16: nlp reclaims)."""
    from tenants.models import Quota

    Quota.objects.filter(tenant__name="vision", gpu_model="H100").update(guaranteed_gpus=0, limit_gpus=32)
    return [submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8,
                                                            command=long_run(9999))) for _ in range(4)]


def test_reclaim_preempts_a_borrower_records_why_and_requeues_it(users, api):
    victims = fill_h100_with_research(users)
    assert all(v.status != JobStatus.QUEUED for v in victims)
    reclaimer = submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain",
                                                              gpu_model="H100", gpus_per_node=8))
    preempted = [Job.objects.get(pk=v.pk) for v in victims]
    hit = [v for v in preempted if v.retry_count == 1]
    assert len(hit) == 1  # a minimal set: one node's worth
    victim = hit[0]
    event = victim.events.get(to_status="preempted")
    assert event.reason == "Preempted by a job of tenant nlp (reclaim within guarantee)."  # no id: another tenant's
    assert {key: event.data[key] for key in ("preemptor", "preemptor_tenant", "preemptor_owner", "rule")} == {
        "preemptor": reclaimer.pk, "preemptor_tenant": "nlp", "preemptor_owner": users["bob"].pk,
        "rule": "reclaim within guarantee"}
    assert victim.status in (JobStatus.QUEUED, JobStatus.ADMITTED, JobStatus.DISPATCHING)
    assert victim.events.filter(to_status="queued", reason__startswith="Requeued after preemption (retry 1)").exists()
    reclaimer.refresh_from_db()
    assert reclaimer.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING)  # admitted by the pass that followed
    assert reclaimer.events.filter(kind="wait_reason", data__code="preemption_pending").exists()
    body = api("alice").get(f"/api/jobs/{victim.pk}/").json()
    assert body["retry_count"] == 1


def test_opting_out_of_requeue_leaves_the_job_preempted(users):
    victims = fill_h100_with_research(users)
    Job.objects.filter(pk__in=[v.pk for v in victims]).update(requeue_on_preemption=False)
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="H100",
                                                  gpus_per_node=8))
    stopped = Job.objects.filter(pk__in=[v.pk for v in victims], status=JobStatus.PREEMPTED).get()
    assert stopped.failure_category == "preempted" and "reclaim within guarantee" in stopped.failure_message


def test_hold_and_release(users, api):
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    waiting = submission.submit_job(users["alice"], job_payload(gpus_per_node=8))
    body = api("alice").post(f"/api/jobs/{waiting.pk}/hold/").json()
    assert body["held_by"] == "user" and body["wait_reason"]["code"] == "held"
    assert body["wait_reason"]["message"] == "Held by the user; it will not start until released."
    assert api("bob").post(f"/api/jobs/{waiting.pk}/hold/").status_code == 404
    body = api("alice").post(f"/api/jobs/{waiting.pk}/release/").json()
    assert body["held_by"] == "" and body["wait_reason"]["code"] == "quota_exhausted"
    assert waiting.events.filter(kind="hold").count() == 2


def test_reservation_holds_gpus_and_says_for_whom(users, api):
    Reservation.objects.create(tenant=Tenant.objects.get(name="nlp"), gpu_model="L40S", gpus=30,
                               start=timezone.now() - timedelta(minutes=1), end=timezone.now() + timedelta(hours=6))
    job = submission.submit_job(users["alice"], job_payload(gpu_model="L40S", gpus_per_node=4))
    body = api("alice").get(f"/api/jobs/{job.pk}/").json()
    assert body["wait_reason"]["code"] == "reserved"
    assert "30 of the 32 free L40S GPUs are reserved for tenant nlp until" in body["wait_reason"]["message"]
    assert body["estimated_start"] is not None


def test_estimated_start_and_positions_in_the_api(users, api):
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999),
                                                        max_runtime_minutes=120))
    first = api("alice").post("/api/jobs/", job_payload(gpus_per_node=8, max_runtime_minutes=60), format="json")
    body = first.json()
    assert body["queue_position"] == 1 and body["tenant_queue_position"] == 1
    assert body["estimated_start"] is not None  # when the running ones reach their max runtime


def test_queue_page_anonymises_other_tenants(client, users, api):
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    mine = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="alice-waits"))
    assert client.login(username="bob", password="demo")
    html = client.get("/queue/").content.decode()
    assert "another tenant" in html and "alice-waits" not in html and "Quota exhausted" in html
    assert "Fair share" in html
    rows = api("bob").get("/api/queue/").json()["results"]
    assert rows[0]["tenant"] == "vision" and rows[0]["job"] is None and rows[0]["wait_reason"] == "quota_exhausted"
    assert "16 of its 16 A100" in rows[0]["message"]  # the reason in words, for another tenant's job too
    own = api("alice").get("/api/queue/").json()["results"]
    assert own[0]["job"] == mine.pk and "16 of its 16 A100" in own[0]["message"]
    shares = api("bob").get("/api/fair-share/").json()
    vision = next(s for s in shares if s["tenant"] == "vision")
    assert vision["running_gpus"] == 16 and vision["fair_share"] == pytest.approx(1 / 3, abs=1e-3)


def test_submit_rejects_what_can_never_fit_and_bad_shapes(api):
    client = api("alice")
    never = client.post("/api/jobs/", job_payload(gpus_per_node=8, nodes=5), format="json")
    assert never.status_code == 422 and "nodes" in never.json()
    share = client.post("/api/jobs/", job_payload(gpus_per_node=2, gpu_share=0.5), format="json")
    assert "A GPU share below 1 needs exactly 1 GPU on 1 node." in share.json()["gpu_share"][0]
    topo = client.post("/api/jobs/", job_payload(nodes=2, topology="same_node"), format="json")
    assert "same_node needs nodes = 1" in topo.json()["topology"][0]
    ok = client.post("/api/jobs/", job_payload(gpus_per_node=1, gpu_share=0.25, cpus_per_node=4,
                                               memory_gb_per_node=32), format="json")
    assert ok.status_code == 201, ok.content
    body = ok.json()
    assert body["gpu_share"] == 0.25 and body["cpus_per_node"] == 4 and body["memory_gb_per_node"] == 32
    assert body["placement"][0]["gpus"] and body["total_gpus"] == 0.25


def test_a_pass_that_fails_halfway_leaves_nothing(users, monkeypatch):
    from scheduling.passes import scheduler

    with monkeypatch.context() as patch:
        patch.setattr("scheduling.jobs.submission.request_scheduling_pass", lambda: None)
        queued = submission.submit_job(users["alice"], job_payload(gpus_per_node=4))

        def broken(*args, **kwargs):
            raise RuntimeError("disk full")

        patch.setattr(scheduler, "bulk_insert", broken)
        with pytest.raises(RuntimeError):
            run_pass()
    queued.refresh_from_db()
    assert queued.status == JobStatus.QUEUED and not queued.allocations.exists()
    assert not queued.events.filter(to_status="admitted").exists()
    run_pass()  # the next, healthy pass admits it
    queued.refresh_from_db()
    assert queued.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING)


def test_only_one_pass_at_a_time(users):
    from django.db import connections

    holder_ready, release = threading.Event(), threading.Event()

    def hold_lock():
        conn = connections.create_connection("default")
        with conn.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PASS_LOCK_KEY])
            holder_ready.set()
            release.wait(10)
            cursor.execute("COMMIT")
        conn.close()

    assert connection.vendor == "postgresql"
    thread = threading.Thread(target=hold_lock)
    thread.start()
    holder_ready.wait(10)
    try:
        assert run_pass().ran is False
    finally:
        release.set()
        thread.join()
    assert run_pass().ran is True
