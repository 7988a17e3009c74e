"""The impact preview comes true: on small random worlds in the database, the pass after a request's approval
admits and preempts exactly what the preview said, and the request's own job starts when the preview said.

Time is held still (the preview and the pass read the same clock), and nothing else changes in between: the
world, the request, its preview, the approval, the real pass."""

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleet.models import Cluster
from governance import impact as what_if
from governance import services
from governance.models import ApproverScope, PriorityRequest, RequestKind
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus, TaskType
from scheduling.passes import preview
from scheduling.passes.scheduler import run_pass
from tests.factories import make_node, make_task_type, make_tenant, make_user

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
TASK_TYPES = {"low": (10, True), "mid": (50, True), "high": (80, False), "top": (100, False)}

job_spec = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 4, 8]), st.sampled_from(list(TASK_TYPES)),
                     st.sampled_from([30, 120, 600]))
worlds = st.fixed_dictionaries({
    "nodes": st.lists(st.sampled_from([4, 8]), min_size=1, max_size=3),
    "quotas": st.tuples(st.tuples(st.integers(0, 8), st.integers(0, 16)),
                        st.tuples(st.integers(0, 8), st.integers(0, 16))),
    "running": st.lists(job_spec, max_size=5),
    "waiting": st.lists(job_spec, min_size=1, max_size=4),
    "kind": st.sampled_from([RequestKind.PRIORITY, RequestKind.PRIORITY, RequestKind.PRIORITY,
                             RequestKind.RUNTIME_EXTENSION, RequestKind.BURST, RequestKind.QUOTA,
                             RequestKind.RESERVATION]),
    "pick": st.integers(0, 10),
    "amount": st.integers(1, 16),
})


def _build(world: dict) -> dict:
    """Nodes, two tenants with their quotas, jobs admitted by a first real pass, then jobs still waiting."""
    for code, (priority, preemptible) in TASK_TYPES.items():
        make_task_type(code, priority, preemptible, runtime=600)
    cluster = Cluster.objects.create(name="sim")
    for i, gpus in enumerate(world["nodes"]):
        make_node(cluster, f"n{i}", "A100", gpus=gpus, rack=f"r{i % 2}")
    tenants, users = {}, {}
    for name, (guaranteed, extra) in zip(("a", "b"), world["quotas"], strict=True):
        tenants[name] = make_tenant(name, quotas={"A100": (guaranteed, guaranteed + extra)})
        users[name] = make_user(f"user-{name}", tenants[name])
    users["admin"] = make_user("admin")

    def submit(spec, offset):
        tenant, gpus, code, minutes = spec
        if gpus > max(world["nodes"]):
            return None
        try:
            with mock.patch("django.utils.timezone.now", return_value=NOW - timedelta(minutes=offset)):
                return submission.submit_job(users[tenant], {
                    "project": f"{tenant}/default", "task_type": code, "gpu_model": "A100", "gpus_per_node": gpus,
                    "image": "registry.local/x:1", "max_runtime_minutes": minutes})
        except ValidationError:  # refused (no quota for it): the world simply has one job fewer
            return None  # any other error is a bug of the submission, and fails the test

    for i, spec in enumerate(world["running"]):
        submit(spec, 60 - i)
    with mock.patch("django.utils.timezone.now", return_value=NOW - timedelta(minutes=30)):
        run_pass()
    waiting = [job for i, spec in enumerate(world["waiting"]) if (job := submit(spec, 20 - i))]
    return {"tenants": tenants, "users": users, "waiting": waiting}


def _request(world: dict, built: dict) -> PriorityRequest | None:
    pick, amount = world["pick"], world["amount"]
    queued = list(Job.objects.filter(status=JobStatus.QUEUED).select_related("tenant", "task_type", "owner"))
    active = list(Job.objects.filter(status=JobStatus.ADMITTED).select_related("tenant", "task_type", "owner"))
    tenant = built["tenants"]["ab"[pick % 2]]
    common = {"scope": ApproverScope.PLATFORM, "justification": "A property test asks for it.",
              "expires_at": NOW + timedelta(days=1)}
    kind = world["kind"]
    if kind == RequestKind.PRIORITY:
        if not queued:
            return None
        job = queued[pick % len(queued)]
        higher = [t for t in TaskType.objects.order_by("priority") if t.priority > job.priority]
        if not higher:
            return None
        return PriorityRequest.objects.create(kind=kind, tenant=job.tenant, requester=job.owner, job=job,
                                              task_type=higher[pick % len(higher)], **common)
    if kind == RequestKind.RUNTIME_EXTENSION:
        jobs = queued + active
        if not jobs:
            return None
        job = jobs[pick % len(jobs)]
        return PriorityRequest.objects.create(kind=kind, tenant=job.tenant, requester=job.owner, job=job,
                                              max_runtime_minutes=(job.max_runtime_minutes or 0) + amount * 60,
                                              **common)
    requester = built["users"][tenant.name]
    if kind == RequestKind.QUOTA:
        return PriorityRequest.objects.create(kind=kind, tenant=tenant, requester=requester, gpu_model="A100",
                                              guaranteed=amount // 2, limit=amount, **common)
    start = NOW - timedelta(hours=1) if pick % 3 else NOW + timedelta(hours=1)  # in force, or later
    return PriorityRequest.objects.create(kind=kind, tenant=tenant, requester=requester, gpu_model="A100",
                                          gpus=amount, start=start, end=NOW + timedelta(hours=5), **common)


@example(world={"nodes": [8], "quotas": ((0, 8), (0, 8)), "running": [("b", 8, "low", 600)],
                "waiting": [("a", 8, "low", 120)], "kind": RequestKind.PRIORITY, "pick": 1, "amount": 1})
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(world=worlds)
def test_the_pass_after_approval_does_what_the_preview_said(world):
    with transaction.atomic():
        built = _build(world)
        request = _request(world, built)
        if request is not None:
            _check(request, built)
        transaction.set_rollback(True)


def _check(request: PriorityRequest, built: dict) -> None:
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        change = services.change_of(request, NOW)
        said = preview.next_pass(preview.each_cluster(change), NOW)
        impact = what_if.summarise(said, request.tenant.name, NOW,
                                   request.job_id if request.kind in (RequestKind.PRIORITY,
                                                                      RequestKind.RUNTIME_EXTENSION) else None)
        services.decide(built["users"]["admin"], request, approve=True)
        done = run_pass()
        assert set(done.admitted_ids) == said.admitted(), (impact, done)
        assert {(victim, preemptor) for victim, preemptor, _rule in done.preempted} == {
            (p.victim_id, p.preemptor_id) for p in said.preemptions()}, (impact, done)
        own_starts = {e["job"] for e in impact["starts"] if e["job"] is not None and e["when"] == "now"}
        assert own_starts <= set(done.admitted_ids)
        subject = impact.get("subject")
        if subject and subject["after"]["starts"] == "now":
            assert request.job_id in done.admitted_ids
        if subject and subject["after"]["starts"] == "after_preemption":
            assert request.job_id not in done.admitted_ids
            assert {v for v, p, _r in done.preempted if p == request.job_id} == {
                e["job"] if e["job"] is not None else v for e, v in zip(
                    subject["after"]["victims"], said.outcome(request.job_id).victims, strict=True)}
            following = run_pass()  # the pass the first one asks for once its victims have stopped
            assert request.job_id in following.admitted_ids


def test_a_priority_that_preempts_says_its_job_starts_right_after(db):
    """The case that was reported: the preview said "would start now: nothing" beside "would preempt", and the
    job started the moment its request was approved. It now says the job starts right after that preemption."""
    world = {"nodes": [8], "quotas": ((0, 8), (0, 8)), "running": [("b", 8, "low", 600)],
             "waiting": [("a", 8, "low", 120)], "kind": RequestKind.PRIORITY, "pick": 1, "amount": 1}
    built = _build(world)
    request = _request(world, built)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        impact = services.impact_of(request, NOW)
    after = impact["subject"]["after"]
    assert after["starts"] == "after_preemption"
    assert [v["tenant"] for v in after["victims"]] == ["b"] and after["victims"][0]["job"] is None
    assert impact["subject"]["before"]["starts"] == "waits"
    [start] = impact["starts"]
    assert (start["job"], start["when"], start["victims"]) == (request.job_id, "after_preemption", 1)
    [preempt] = impact["preempts"]
    assert preempt["tenant"] == "b" and preempt["rule"] == "higher priority class"
    _check(request, built)
