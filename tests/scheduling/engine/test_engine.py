"""The pure engine: hand-made snapshots for each policy, and properties over random ones."""

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import (
    Capacity,
    DepartmentQuota,
    NodeSnapshot,
    Placement,
    Policy,
    QuotaSnapshot,
    Reservation,
    RunningJob,
    Snapshot,
    TenantInfo,
    UsageRecord,
    WaitingJob,
    WaitReason,
    schedule,
)

NOW = 1_000_000.0
HOUR = 3600.0


def nodes(count, model="A100", gpus=8, racks=1, start=1, **extra):
    return tuple(NodeSnapshot(i, f"n{i}", model, tuple(range(gpus)), rack=f"r{(i - start) % racks}",
                              network_domain=f"ib{(i - start) % racks // 2}", **extra)
                 for i in range(start, start + count))


def quota(tenant="t", model="A100", guaranteed=64, limit=64, **kw):
    return QuotaSnapshot(tenant, model, guaranteed, limit, **kw)


def running(job_id, tenant, node, gpus, model="A100", priority=10, started=NOW - HOUR, runtime=2 * HOUR, **kw):
    return RunningJob(job_id, tenant, model, (Placement(node, tuple(gpus)),), priority=priority, started_at=started,
                      max_runtime=runtime, **kw)


def job(job_id, g, n=1, tenant="t", priority=10, submitted=None, **kw):
    return WaitingJob(job_id, tenant, kw.pop("model", "A100"), g, nodes=n, priority=priority,
                      submitted_at=submitted if submitted is not None else job_id, **kw)


def snap(**kw):
    kw.setdefault("now", NOW)
    return Snapshot(**kw)


def test_engine_imports_no_django():
    import ast
    import pathlib

    for path in pathlib.Path("scheduling/engine").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "django" not in imported, path


def test_priority_then_submit_time_orders_admission():
    result = schedule(snap(nodes=nodes(1), quotas=(quota(limit=8, guaranteed=8),), waiting=(
        job(1, 8, priority=10, submitted=1.0), job(2, 8, priority=50, submitted=2.0),
        job(3, 8, priority=50, submitted=1.5))))
    assert [a.job_id for a in result.admissions] == [3]
    assert [(w.job_id, w.position) for w in result.waiting] == [(2, 1), (1, 2)]


def test_fair_share_puts_the_lighter_tenant_first_and_reports_why():
    usage = (UsageRecord("heavy", NOW - 3600, 100 * 3600), UsageRecord("light", NOW - 3600, 1 * 3600))
    result = schedule(snap(nodes=nodes(1), quotas=(quota("heavy"), quota("light")), usage=usage,
                           tenants=(TenantInfo("heavy", 1), TenantInfo("light", 1)),
                           running=(running(9, "x", 1, range(8)),),
                           waiting=(job(1, 4, tenant="heavy", submitted=1), job(2, 4, tenant="light", submitted=2))))
    assert [w.job_id for w in result.waiting] == [2, 1]
    shares = {s.tenant: s for s in result.shares}
    assert shares["heavy"].usage_gpu_hours > shares["light"].usage_gpu_hours
    assert math.isclose(shares["heavy"].fair_share, 1 / 3)


def test_usage_decays_with_the_half_life():
    old = (UsageRecord("a", NOW - 14 * 86400, 400 * 3600),)  # two half-lives ago: counts a quarter
    result = schedule(snap(nodes=nodes(1), usage=old, tenants=(TenantInfo("a"),)))
    assert math.isclose(next(s for s in result.shares if s.tenant == "a").usage_gpu_hours, 100.0)


def test_weight_doubles_the_share():
    usage = (UsageRecord("a", NOW, 10 * 3600), UsageRecord("b", NOW, 10 * 3600))
    result = schedule(snap(nodes=nodes(1), quotas=(quota("a"), quota("b")), usage=usage,
                           tenants=(TenantInfo("a", 1), TenantInfo("b", 2)),
                           running=(running(9, "x", 1, range(8)),),
                           waiting=(job(1, 1, tenant="a"), job(2, 1, tenant="b"))))
    assert [w.job_id for w in result.waiting] == [2, 1]


def test_gang_is_all_or_nothing_and_explained():
    result = schedule(snap(nodes=nodes(3), quotas=(quota(),), running=(running(9, "o", 1, range(4)),),
                           waiting=(job(1, 8, n=3),)))
    assert result.admissions == []
    wait = result.wait_for(1)
    assert wait.reason == WaitReason.GANG_UNPLACEABLE and wait.params["fitting_nodes"] == 2
    assert "nodes with that many free GPUs now: 2" in wait.message


def test_topology_prefers_the_tightest_domain_and_explains_the_largest_block():
    cluster = nodes(6, racks=3)  # racks r0: n1,n4  r1: n2,n5  r2: n3,n6
    result = schedule(snap(nodes=cluster, quotas=(quota(limit=100, guaranteed=100),),
                           running=(running(9, "o", 3, range(2)),),
                           waiting=(job(1, 8, n=2),)))
    chosen = {p.node_id for p in result.admissions[0].placements}
    racks = {cluster[i - 1].rack for i in chosen}
    assert len(racks) == 1  # one rack, not spread
    blocked = schedule(snap(nodes=cluster, quotas=(quota(limit=100, guaranteed=100),),
                            running=(running(9, "o", 1, range(2)), running(8, "o", 2, range(2)),
                                     running(7, "o", 3, range(2))),
                            waiting=(job(1, 8, n=2, topology="same_rack"),)))
    wait = blocked.wait_for(1)
    assert wait.reason == WaitReason.TOPOLOGY
    assert wait.message.startswith("Needs 16 A100 GPUs (2 x 8) in one rack; the largest free block in any rack is 8")


def test_packing_keeps_whole_nodes_free():
    result = schedule(snap(nodes=nodes(2), quotas=(quota(),), running=(running(9, "o", 2, range(6)),),
                           waiting=(job(1, 2),)))
    assert result.admissions[0].placements[0].node_id == 2  # fills the busy node, keeps n1 whole
    first_fit = schedule(snap(nodes=nodes(2), quotas=(quota(),), running=(running(9, "o", 2, range(6)),),
                              waiting=(job(1, 2),), policy=Policy.first_fit()))
    assert first_fit.admissions[0].placements[0].node_id == 1


def test_fractional_gpus_share_one_gpu_and_never_overcommit():
    waiting = tuple(job(i, 1, gpu_milli=250) for i in range(1, 6))
    result = schedule(snap(nodes=nodes(1, gpus=1), quotas=(quota(),), waiting=waiting))
    assert [a.job_id for a in result.admissions] == [1, 2, 3, 4]
    assert all(a.placements[0].gpu_milli == 250 for a in result.admissions)
    assert result.wait_for(5).reason == WaitReason.INSUFFICIENT_GPUS


def test_cpu_and_memory_are_accounted():
    tight = nodes(1, cpu_milli=8000, memory_mib=65536)
    result = schedule(snap(nodes=tight, quotas=(quota(),), waiting=(
        job(1, 2, cpu_milli=6000, memory_mib=1024), job(2, 2, cpu_milli=4000, memory_mib=1024))))
    assert result.admitted_ids() == {1}
    assert result.wait_for(2).reason == WaitReason.HOST_RESOURCES


def test_quota_exhausted_and_borrowing_limit_are_told_apart():
    result = schedule(snap(nodes=nodes(4), quotas=(quota("a", guaranteed=8, limit=8), quota("b", guaranteed=8,
                                                                                           limit=16)),
                           running=(running(9, "a", 1, range(8)), running(8, "b", 2, range(8)),
                                    running(7, "b", 3, range(4))),
                           waiting=(job(1, 1, tenant="a"), job(2, 8, tenant="b"))))
    assert result.wait_for(1).reason == WaitReason.QUOTA_EXHAUSTED
    b = result.wait_for(2)
    assert b.reason == WaitReason.BORROWING_LIMIT
    assert b.message.startswith("Tenant b uses 12 A100 GPUs, 4 of them borrowed beyond its guaranteed 8")


def test_department_caps_the_sum_of_its_tenants():
    result = schedule(snap(nodes=nodes(2), quotas=(quota("a", department="d"), quota("b", department="d")),
                           departments=(DepartmentQuota("d", "A100", 8),),
                           running=(running(9, "a", 1, range(6)),), waiting=(job(1, 4, tenant="b"),)))
    assert result.wait_for(1).reason == WaitReason.DEPARTMENT_QUOTA


def test_never_fits_and_no_healthy_node():
    result = schedule(snap(nodes=nodes(2) + (NodeSnapshot(3, "n3", "A100", (), schedulable=False, gpu_total=8),),
                           quotas=(quota(),), waiting=(job(1, 16), job(2, 8, n=3))))
    never = result.wait_for(1)
    assert never.reason == WaitReason.NEVER_FITS and never.params["max_per_node"] == 8
    assert result.wait_for(2).reason == WaitReason.NO_HEALTHY_NODE
    assert never.estimated_start is None


def test_approval_and_holds_wait_without_an_estimate():
    result = schedule(snap(nodes=nodes(1), quotas=(quota(),), waiting=(
        job(1, 1, awaiting_approval=True, task_type="inference"), job(2, 1, held="user"))))
    assert result.wait_for(1).reason == WaitReason.AWAITING_APPROVAL
    assert result.wait_for(2).message == "Held by the user; it will not start until released."
    assert result.admitted_ids() == set()


def test_reservation_holds_capacity_for_its_tenant():
    reservation = Reservation(1, "owner", "A100", 8, NOW - 60, NOW + 4 * HOUR)
    result = schedule(snap(nodes=nodes(2), quotas=(quota("owner"), quota("other")), reservations=(reservation,),
                           running=(running(9, "x", 1, range(4)),),
                           waiting=(job(1, 8, tenant="other"), job(2, 8, tenant="owner"))))
    wait = result.wait_for(1)
    assert wait.reason == WaitReason.RESERVED
    assert "reserved for tenant owner until" in wait.message
    assert result.admitted_ids() == {2}


def test_backfill_only_when_the_head_is_not_delayed():
    # n1 busy until NOW+2h (max runtime); head needs both nodes' worth: 16 GPUs
    base = {"nodes": nodes(2), "quotas": (quota(limit=100, guaranteed=100),),
            "running": (running(9, "o", 1, range(8), started=NOW, runtime=2 * HOUR),)}
    short = job(2, 4, priority=1, max_runtime=HOUR)
    long = job(3, 4, priority=1, max_runtime=10 * HOUR)
    result = schedule(snap(**base, waiting=(job(1, 8, n=2, priority=50, max_runtime=HOUR), short, long)))
    assert result.admitted_ids() == {2}
    assert any(a.backfilled for a in result.admissions)
    assert result.wait_for(3).reason == WaitReason.PRIORITY
    assert "would delay it" in result.wait_for(3).message
    no_backfill = schedule(snap(**base, waiting=(job(1, 8, n=2, priority=50), short), policy=Policy(backfill=False)))
    assert no_backfill.admitted_ids() == set()


def test_estimated_start_follows_running_jobs_max_runtime():
    result = schedule(snap(nodes=nodes(1), quotas=(quota(),),
                           running=(running(9, "o", 1, range(8), started=NOW - HOUR, runtime=3 * HOUR),),
                           waiting=(job(1, 8, max_runtime=HOUR), job(2, 8, max_runtime=HOUR))))
    assert result.wait_for(1).estimated_start == NOW + 2 * HOUR
    assert result.wait_for(2).estimated_start == NOW + 3 * HOUR


def test_estimated_start_uses_the_expected_runtime_from_history():
    result = schedule(snap(nodes=nodes(1), quotas=(quota(),),
                           running=(running(9, "o", 1, range(8), started=NOW, runtime=10 * HOUR,
                                            expected_runtime=HOUR),),
                           waiting=(job(1, 8),)))
    assert result.wait_for(1).estimated_start == NOW + HOUR


def test_likely_start_range_brackets_the_estimate_as_calibrated():
    policy = Policy()
    result = schedule(snap(nodes=nodes(1), quotas=(quota(),),
                           running=(running(9, "o", 1, range(8), started=NOW - HOUR, runtime=3 * HOUR),),
                           waiting=(job(1, 8, max_runtime=HOUR), job(2, 1, held="user"))))
    wait = result.wait_for(1)
    assert wait.estimated_start == NOW + 2 * HOUR
    assert wait.earliest_start == NOW + policy.eta_low_ratio * 2 * HOUR
    assert wait.latest_start == NOW + policy.eta_high_ratio * 2 * HOUR + policy.eta_margin_seconds
    assert wait.earliest_start <= wait.estimated_start <= wait.latest_start
    held = result.wait_for(2)
    assert held.estimated_start is None and held.earliest_start is None and held.latest_start is None


def test_higher_class_preempts_minimal_newest_lowest_priority_first():
    run = (running(11, "a", 1, range(0, 4), priority=10, started=NOW - 300),
           running(12, "a", 1, range(4, 8), priority=10, started=NOW - 100),
           running(13, "b", 2, range(0, 8), priority=30, started=NOW - 50),
           running(14, "b", 3, range(0, 8), priority=90, preemptible=False))
    result = schedule(snap(nodes=nodes(3), quotas=(quota("a"), quota("b"), quota("c")), running=run,
                           waiting=(job(1, 4, tenant="c", priority=80, preemptible=False),)))
    assert [p.victim_id for p in result.preemptions] == [12]  # priority 10 before 30, newest first, one is enough
    assert result.preemptions[0].rule == "higher priority class"
    assert result.wait_for(1).reason == WaitReason.PREEMPTION_PENDING
    assert result.wait_for(1).estimated_start == NOW


def test_reclaim_within_guarantee_preempts_borrowers_only():
    run = (running(11, "lender", 1, range(8), priority=10),
           running(12, "borrower", 2, range(8), priority=10, started=NOW - 10))
    quotas = (quota("lender", guaranteed=8, limit=8), quota("borrower", guaranteed=0, limit=16),
              quota("owner", guaranteed=8, limit=8))
    result = schedule(snap(nodes=nodes(2), quotas=quotas, running=run, waiting=(job(1, 8, tenant="owner"),)))
    assert [(p.victim_id, p.rule) for p in result.preemptions] == [(12, "reclaim within guarantee")]


def test_non_preemptible_jobs_are_never_victims():
    run = (running(11, "a", 1, range(8), priority=1, preemptible=False),)
    result = schedule(snap(nodes=nodes(1), quotas=(quota("a"), quota("b")), running=run,
                           waiting=(job(1, 8, tenant="b", priority=99, preemptible=False),)))
    assert result.preemptions == []
    assert result.wait_for(1).reason == WaitReason.INSUFFICIENT_GPUS


def test_capacity_places_shares_on_the_fullest_gpu():
    cap = Capacity(nodes(1, gpus=2))
    cap.take((Placement(1, (1,), 500),))
    placement = cap.place_gang(job(1, 1, gpu_milli=250))
    assert placement == (Placement(1, (1,), 250),)


# --- properties -----------------------------------------------------------------------------------------
MODELS = ("A100", "H100")
waiting_jobs = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(MODELS), st.integers(1, 8),
                                  st.integers(1, 3), st.integers(0, 100), st.booleans(),
                                  st.sampled_from([1000, 1000, 500, 250]), st.sampled_from(
                                      ["any", "same_rack", "same_network_domain"]),
                                  st.sampled_from([HOUR, 4 * HOUR, 24 * HOUR])), max_size=25)
running_jobs = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 7), st.integers(1, 4), st.integers(0, 100),
                                  st.booleans(), st.integers(0, 10)), max_size=10)


def build(node_gpus, jobs, limits, runs):
    snap_nodes = tuple(NodeSnapshot(i, f"n{i}", m, tuple(range(g)), rack=f"r{i % 3}", network_domain=f"ib{i % 2}",
                                    schedulable=ok) for i, (m, g, ok) in enumerate(node_gpus))
    quotas = tuple(QuotaSnapshot(t, m, limits[k] // 2, limits[k]) for k, (t, m) in enumerate(
        (t, m) for t in "abc" for m in MODELS))
    taken, run = set(), []
    for k, (tenant, node_index, count, priority, preemptible, age) in enumerate(runs):
        node = snap_nodes[node_index % len(snap_nodes)]
        free = [i for i in node.gpu_indices if (node.id, i) not in taken][:count]
        if not free or not node.schedulable:
            continue
        taken |= {(node.id, i) for i in free}
        run.append(RunningJob(1000 + k, tenant, node.gpu_model, (Placement(node.id, tuple(free)),),
                              priority=priority, preemptible=preemptible, started_at=NOW - age * 600,
                              max_runtime=8 * HOUR))
    waiting = []
    for i, (t, m, g, n, p, pre, milli, topo, rt) in enumerate(jobs):
        if milli < 1000:
            g, n = 1, 1
        waiting.append(WaitingJob(i, t, m, g, nodes=n, priority=p, submitted_at=i, gpu_milli=milli, topology=topo,
                                  preemptible=pre, max_runtime=rt))
    return Snapshot(nodes=snap_nodes, waiting=tuple(waiting), quotas=quotas, running=tuple(run), now=NOW)


@settings(max_examples=150, deadline=None)
@given(node_gpus=st.lists(st.tuples(st.sampled_from(MODELS), st.integers(1, 8), st.booleans()), min_size=1,
                          max_size=8),
       jobs=waiting_jobs, limits=st.lists(st.integers(0, 24), min_size=6, max_size=6), runs=running_jobs)
def test_properties_hold_for_any_snapshot(node_gpus, jobs, limits, runs):
    snapshot = build(node_gpus, jobs, limits, runs)
    result = schedule(snapshot)
    assert schedule(snapshot) == result  # deterministic

    by_id = {j.id: j for j in snapshot.waiting}
    node_by_id = {n.id: n for n in snapshot.nodes}
    victims = {p.victim_id for p in result.preemptions}
    running_by_id = {r.id: r for r in snapshot.running}
    assert all(running_by_id[v].preemptible for v in victims)  # non-preemptible never preempted

    share = Counter()
    for r in snapshot.running:
        if r.id not in victims:
            for p in r.placements:
                for i in p.gpu_indices:
                    share[(p.node_id, i)] += p.gpu_milli
    usage = Counter()
    for r in snapshot.running:
        if r.id not in victims:
            usage[(r.tenant, r.gpu_model)] += r.gpus
    admitted_keys = set()
    for admission in result.admissions:
        job = by_id[admission.job_id]
        assert len(admission.placements) == job.nodes  # gangs are atomic
        assert len({p.node_id for p in admission.placements}) == job.nodes
        for placement in admission.placements:
            node = node_by_id[placement.node_id]
            assert node.schedulable and node.gpu_model == job.gpu_model
            assert len(placement.gpu_indices) == job.gpus_per_node
            for index in placement.gpu_indices:
                assert index in node.gpu_indices
                share[(node.id, index)] += placement.gpu_milli
        if job.topology == "same_rack":
            assert len({node_by_id[p.node_id].rack for p in admission.placements}) == 1
        usage[(job.tenant, job.gpu_model)] += job.gpus
        admitted_keys.add((job.tenant, job.gpu_model))
    assert all(total <= 1000 for total in share.values())  # no GPU over-committed
    limit = {(q.tenant, q.gpu_model): q.limit for q in snapshot.quotas}
    assert all(usage[key] <= limit[key] + 1e-9 for key in admitted_keys)  # admissions keep tenants within limit
    decided = [a.job_id for a in result.admissions] + [w.job_id for w in result.waiting]
    assert sorted(decided) == sorted(by_id)  # every job decided once: admitted, or one reason
    assert [w.position for w in result.waiting] == list(range(1, len(result.waiting) + 1))
    for wait in result.waiting:
        assert wait.message and "%(" not in wait.message
        assert wait.estimated_start is None or wait.estimated_start >= NOW


@settings(max_examples=150, deadline=None)
@given(node_gpus=st.lists(st.tuples(st.just("A100"), st.integers(2, 8), st.just(True)), min_size=1, max_size=6),
       jobs=waiting_jobs, runs=running_jobs)
def test_backfill_never_delays_the_head_jobs_estimated_start(node_gpus, jobs, runs):
    base = build(node_gpus, [(t, "A100", *rest) for t, _m, *rest in jobs], [99] * 6, runs)
    base = Snapshot(nodes=base.nodes, waiting=base.waiting, quotas=base.quotas, running=base.running, now=NOW,
                    policy=Policy(preemption=False))
    with_backfill = schedule(base)
    without = schedule(Snapshot(**{**base.__dict__, "policy": Policy(preemption=False, backfill=False)}))
    head = next((w for w in without.waiting if w.reason in (
        WaitReason.INSUFFICIENT_GPUS, WaitReason.FRAGMENTED, WaitReason.GANG_UNPLACEABLE, WaitReason.TOPOLOGY)),
        None)
    if head is None or head.estimated_start is None:
        return
    after = with_backfill.wait_for(head.job_id)
    assert after is not None  # the head is never admitted by backfill ahead of itself
    assert after.estimated_start is not None and after.estimated_start <= head.estimated_start + 1e-6


def test_a_reason_names_no_job_of_another_tenant():
    """The blocking head and the preemption victims are named by id only when they are the waiting job's own
    tenant's: another tenant's job reads as on that tenant's row of the queue page (priority, count)."""
    base = {"nodes": nodes(2), "quotas": (quota("t", limit=100, guaranteed=100), quota("u", limit=100, guaranteed=100)),
            "running": (running(9, "o", 1, range(8), started=NOW, runtime=2 * HOUR),)}
    heads = {"u": "A job with priority 50 is ahead", "t": "Job #1 (priority 50, tenant t) is ahead"}
    for blocker_tenant, sentence in heads.items():
        result = schedule(snap(**base, waiting=(job(1, 8, n=2, tenant=blocker_tenant, priority=50, max_runtime=HOUR),
                                                job(3, 4, priority=1, max_runtime=10 * HOUR))))
        wait = result.wait_for(3)
        assert wait.reason == WaitReason.PRIORITY and wait.message.startswith(sentence)
        assert ("blocker_id" in wait.params) == (blocker_tenant == "t")
    run = (running(11, "a", 1, range(0, 4), priority=10), running(12, "c", 1, range(4, 8), priority=10))
    for victims_tenant, sentence in (("a", "Waiting for 1 preempted job(s) to release"),
                                     ("c", "Waiting for 1 preempted job(s) (#12) to release")):
        result = schedule(snap(nodes=nodes(1), quotas=(quota("a"), quota("c")), running=(
            run[0] if victims_tenant == "a" else run[1],), waiting=(job(1, 8, tenant="c", priority=80,
                                                                        preemptible=False),)))
        wait = result.wait_for(1)
        assert wait.reason == WaitReason.PREEMPTION_PENDING and wait.message.startswith(sentence), wait.message
