"""The pure engine: properties over random snapshots, and the exact reasons for hand-made ones."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import (
    NodeSnapshot,
    Placement,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    WaitingJob,
    WaitReason,
    place_gang,
    schedule,
)


def nodes(count, model="A100", gpus=8, **labels):
    return tuple(NodeSnapshot(i + 1, f"n{i + 1}", model, tuple(range(gpus)), **labels) for i in range(count))


def test_engine_imports_no_django():
    import ast
    import pathlib

    for path in pathlib.Path("scheduling/engine").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "django" not in imported, path


def test_priority_then_submit_time_orders_admission():
    snap = Snapshot(nodes=nodes(1), quotas=(QuotaSnapshot("t", "A100", 8, 8),), waiting=(
        WaitingJob(1, "t", "A100", 8, priority=10, submitted_at=1.0),
        WaitingJob(2, "t", "A100", 8, priority=50, submitted_at=2.0),
        WaitingJob(3, "t", "A100", 8, priority=50, submitted_at=1.5),
    ))
    result = schedule(snap)
    assert [a.job_id for a in result.admissions] == [3]
    assert [(w.job_id, w.position) for w in result.waiting] == [(2, 1), (1, 2)]


def test_multi_node_gang_is_all_or_nothing():
    snap = Snapshot(
        nodes=nodes(3), quotas=(QuotaSnapshot("t", "A100", 32, 32),),
        running=(RunningJob(9, "other", "A100", (Placement(1, (0, 1, 2, 3)),)),),
        waiting=(WaitingJob(1, "t", "A100", 8, nodes=3),))
    result = schedule(snap)
    assert result.admissions == []
    wait = result.wait_for(1)
    assert wait.reason == WaitReason.GANG_UNPLACEABLE
    assert wait.params["fitting_nodes"] == 2
    assert "Needs 3 A100 nodes with 8 free GPUs each" in wait.message
    assert "nodes with that many free GPUs now: 2" in wait.message


def test_gang_stays_within_one_cluster():
    two_clusters = (NodeSnapshot(1, "a", "A100", tuple(range(8)), cluster="x"),
                    NodeSnapshot(2, "b", "A100", tuple(range(8)), cluster="y"))
    assert place_gang({1: list(range(8)), 2: list(range(8))}, two_clusters, 8, 2) is None


def test_unschedulable_nodes_and_unhealthy_gpus_are_skipped():
    snap = Snapshot(
        nodes=(NodeSnapshot(1, "down", "A100", tuple(range(8)), schedulable=False),
               NodeSnapshot(2, "half", "A100", (0, 1, 2, 3))),
        quotas=(QuotaSnapshot("t", "A100", 8, 8),),
        waiting=(WaitingJob(1, "t", "A100", 4),))
    result = schedule(snap)
    assert result.admissions[0].placements == (Placement(2, (0, 1, 2, 3)),)


def test_request_larger_than_any_node_never_blocks_others():
    snap = Snapshot(nodes=nodes(2), quotas=(QuotaSnapshot("t", "A100", 64, 64),), waiting=(
        WaitingJob(1, "t", "A100", 8, nodes=3, priority=90),
        WaitingJob(2, "t", "A100", 8, priority=10)))
    result = schedule(snap)
    assert result.wait_for(1).reason == WaitReason.EXCEEDS_CAPACITY
    assert result.wait_for(1).params["capable_nodes"] == 2
    assert result.admitted_ids() == {2}


def test_queue_positions_per_tenant_and_cluster_wide():
    snap = Snapshot(nodes=nodes(1), quotas=(QuotaSnapshot("a", "A100", 8, 8), QuotaSnapshot("b", "A100", 8, 8)),
                    running=(RunningJob(9, "c", "A100", (Placement(1, tuple(range(8))),)),),
                    waiting=tuple(WaitingJob(i, "ab"[i % 2], "A100", 1, submitted_at=i) for i in range(1, 6)))
    result = schedule(snap)
    assert [w.position for w in result.waiting] == [1, 2, 3, 4, 5]
    assert [(w.job_id, w.tenant_position) for w in result.waiting] == [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)]


# --- properties -----------------------------------------------------------------------------------------
MODELS = ("A100", "H100")
waiting_jobs = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(MODELS), st.integers(1, 8),
                                  st.integers(1, 3), st.integers(0, 100)), max_size=25)


@settings(max_examples=200, deadline=None)
@given(node_gpus=st.lists(st.tuples(st.sampled_from(MODELS), st.integers(1, 8), st.booleans()), min_size=1,
                          max_size=8),
       jobs=waiting_jobs, limits=st.lists(st.integers(0, 24), min_size=6, max_size=6))
def test_properties_hold_for_any_snapshot(node_gpus, jobs, limits):
    snap_nodes = tuple(NodeSnapshot(i, f"n{i}", m, tuple(range(g)), schedulable=ok)
                       for i, (m, g, ok) in enumerate(node_gpus))
    quotas = tuple(QuotaSnapshot(t, m, 0, limits[k]) for k, (t, m) in enumerate(
        (t, m) for t in "abc" for m in MODELS))
    waiting = tuple(WaitingJob(i, t, m, g, nodes=n, priority=p, submitted_at=i)
                    for i, (t, m, g, n, p) in enumerate(jobs))
    result = schedule(Snapshot(nodes=snap_nodes, waiting=waiting, quotas=quotas))

    by_id = {j.id: j for j in waiting}
    node_by_id = {n.id: n for n in snap_nodes}
    taken = Counter()
    usage = Counter()
    for admission in result.admissions:
        job = by_id[admission.job_id]
        assert len(admission.placements) == job.nodes  # all or nothing
        assert len({p.node_id for p in admission.placements}) == job.nodes  # distinct nodes
        for placement in admission.placements:
            node = node_by_id[placement.node_id]
            assert node.schedulable and node.gpu_model == job.gpu_model
            assert len(placement.gpu_indices) == job.gpus_per_node
            for index in placement.gpu_indices:
                assert index in node.gpu_indices
                taken[(node.id, index)] += 1
        usage[(job.tenant, job.gpu_model)] += job.gpus
    assert all(count == 1 for count in taken.values())  # no GPU given twice
    limit = {(q.tenant, q.gpu_model): q.limit for q in quotas}
    assert all(used <= limit[key] for key, used in usage.items())  # quota never exceeded
    # every job is decided exactly once: admitted or waiting with one reason and a sentence
    decided = [a.job_id for a in result.admissions] + [w.job_id for w in result.waiting]
    assert sorted(decided) == sorted(by_id)
    assert [w.position for w in result.waiting] == list(range(1, len(result.waiting) + 1))
    for wait in result.waiting:
        assert wait.message and "%(" not in wait.message
