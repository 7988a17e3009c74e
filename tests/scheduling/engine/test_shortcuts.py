"""The engine's shortcuts at 100,000 waiting jobs decide as the long way would: a shape that found no room is
skipped only until capacity is freed, the FGD walk meets each node state at its first node, and slot counts
give the estimates a heap of single slots gives, and a preemption search that releases a node's victims only once
the node could hold a part of the job finds the victims and the placement a search releasing every victim would."""

import heapq
import random

from scheduling.engine import (
    Capacity,
    NodeSnapshot,
    Placement,
    Policy,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    WaitingJob,
    passes,
    schedule,
)
from scheduling.engine.estimate import Slots, shadow
from scheduling.engine.fragmentation import TaskShape, Workload


def _nodes(count, gpus=8, **extra):
    return tuple(NodeSnapshot(i, f"n{i}", "A100", tuple(range(gpus)), **extra) for i in range(1, count + 1))


def test_a_shape_without_room_waits_for_freed_capacity_not_for_its_next_job():
    cap = Capacity(_nodes(1))
    cap.take((Placement(1, tuple(range(6))),))
    first, same_shape = WaitingJob(1, "t", "A100", 4), WaitingJob(2, "t", "A100", 4)
    assert cap.place_gang(first) is None
    assert cap.place_gang(same_shape) is None  # answered from the memo
    mark = cap.checkpoint()
    cap.release((Placement(1, (0, 1)),))
    assert cap.place_gang(same_shape) == (Placement(1, (0, 1, 6, 7)),)  # freed capacity: tried again
    cap.take((Placement(1, (0, 1)),))
    cap.restored(mark)  # back exactly as at the mark: what found no room then finds none now
    assert cap.place_gang(same_shape) is None


def test_a_kept_node_lets_its_own_job_in_and_frees_the_shape_once_unkept():
    cap = Capacity(_nodes(1))
    cap.keep(1, job_id=7, seconds=3600.0)
    other, kept = WaitingJob(1, "t", "A100", 8), WaitingJob(7, "t", "A100", 8)
    assert cap.place_gang(other) is None
    assert cap.place_gang(kept) is not None  # the memo of its shape does not apply to the job the node is kept for
    with cap.ignoring_kept():
        assert cap.place_gang(other) is not None
    assert cap.place_gang(other) is None
    cap.unkeep(7)
    assert cap.place_gang(other) is not None


def test_fgd_scores_the_first_node_of_each_state_as_a_walk_of_every_node_would():
    rng = random.Random(3)
    workload = Workload([(TaskShape(1), 1.0), (TaskShape(4), 1.0)])
    cap = Capacity(_nodes(40, cpu_milli=64000, memory_mib=0), workload=workload)
    for node_id in range(1, 41):
        used = rng.choice([0, 0, 2, 4, 7])
        cap.take((Placement(node_id, tuple(range(used))),), cpu_milli=8000 * used)
    job = WaitingJob(1, "t", "A100", 2, cpu_milli=4000, avoid_nodes=(3, 5))
    walk, seen = [], set()
    for count in sorted(c for c in cap.buckets["A100"] if c >= 2):
        for order in cap.buckets["A100"][count]:
            node_id = cap.by_order[order]
            if cap._fits_host(node_id, job) and cap._node_state(node_id) not in seen:
                seen.add(cap._node_state(node_id))
                walk.append(node_id)
    assert cap._whole_candidates(job, ("A100",)) == walk
    placed = cap.place_gang(job)
    cap.take(placed)  # the index follows the node into its new state
    assert cap._by_state["A100"][cap._node_state(placed[0].node_id)].count(cap.order[placed[0].node_id]) == 1


def test_slot_counts_take_and_give_as_a_heap_of_single_slots():
    rng = random.Random(5)
    times = [rng.choice([0.0, 10.0, 20.0, 35.0]) for _ in range(30)]
    slots, heap = Slots(times), list(times)
    heapq.heapify(heap)
    for _ in range(40):
        k = rng.randint(1, 6)
        plain = [heapq.heappop(heap) for _ in range(k)][-1] if len(heap) >= k else None
        assert slots.take(k) == plain
        if plain is not None:
            at = plain + rng.choice([5.0, 15.0])
            slots.give(k, at)
            for _ in range(k):
                heapq.heappush(heap, at)
        assert len(slots) == len(heap)
    ordered = sorted(heap)
    assert shadow(slots, 3) == (ordered[2], sum(1 for t in ordered[3:] if t <= ordered[2]))


def _crowded(rng: random.Random) -> Snapshot:
    """A cluster full of preemptible work of three tenants, with gangs, shares and two-node victims, and a queue of
    jobs of every class, some of which may stop them (a higher class, or a tenant within its guarantee)."""
    now, models = 1_000_000.0, ("A100", "H100")[: rng.randint(1, 2)]
    nodes = tuple(NodeSnapshot(i, f"n{i}", rng.choice(models), tuple(range(rng.choice([2, 4, 8]))), rack=f"r{i % 3}",
                               network_domain=f"ib{i % 2}", cpu_milli=rng.choice([0, 64000]))
                  for i in range(1, rng.randint(2, 12)))
    free = {(n.id, i): 1000 for n in nodes for i in n.gpu_indices}
    running = []
    for k in range(rng.randint(5, 40)):
        node, share = rng.choice(nodes), rng.choice([1000, 1000, 1000, 500])
        gpus = [i for i in node.gpu_indices if free[(node.id, i)] >= share][:1 if share < 1000 else rng.randint(1, 8)]
        if not gpus:
            continue
        parts = [Placement(node.id, tuple(gpus), share)]
        other = rng.choice(nodes)
        if share == 1000 and other.id != node.id and other.gpu_model == node.gpu_model and rng.random() < 0.3:
            more = [i for i in other.gpu_indices if free[(other.id, i)] == 1000][:len(gpus)]
            parts += [Placement(other.id, tuple(more))] if len(more) == len(gpus) else []
        for part in parts:
            for i in part.gpu_indices:
                free[(part.node_id, i)] -= share
        running.append(RunningJob(100 + k, rng.choice("abc"), node.gpu_model, tuple(parts),
                                  priority=rng.choice([10, 50, 80]), started_at=now - rng.randint(0, 20) * 600,
                                  max_runtime=28800, cpu_milli=rng.choice([0, 4000])))
    waiting = []
    for k in range(rng.randint(1, 20)):
        milli = rng.choice([1000, 1000, 1000, 500])
        g, count = (1, 1) if milli < 1000 else (rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3]))
        waiting.append(WaitingJob(k, rng.choice("abc"), rng.choice(models), g, nodes=count, gpu_milli=milli,
                                  priority=rng.choice([10, 50, 80, 100]), preemptible=rng.random() < 0.4,
                                  submitted_at=now - rng.randint(0, 100) * 600, max_runtime=3600,
                                  topology=rng.choice(["any", "same_rack"]), cpu_milli=rng.choice([0, 8000])))
    quotas = tuple(QuotaSnapshot(t, m, rng.randint(0, 16), 64) for t in "abc" for m in models)
    policy = Policy(placement=rng.choice(["pack", "first_fit"]))
    return Snapshot(nodes=nodes, waiting=tuple(waiting), quotas=quotas, running=tuple(running), now=now, policy=policy)


def test_a_search_that_frees_nodes_once_they_can_hold_a_part_decides_as_one_that_frees_every_victim(monkeypatch):
    rng, lazy, preempted = random.Random(11), [], 0
    snapshots = [_crowded(rng) for _ in range(400)]
    for snapshot in snapshots:
        result = schedule(snapshot)
        lazy.append((result.admissions, result.preemptions, result.waiting))
        preempted += len(result.preemptions)
    assert preempted > 200  # the searches ran, many of them
    eager = passes._Freeing.__init__
    monkeypatch.setattr(passes._Freeing, "__init__", lambda self, cap, g: eager(self, cap, 0))  # every node at once
    for snapshot, decided in zip(snapshots, lazy, strict=True):
        result = schedule(snapshot)
        assert (result.admissions, result.preemptions, result.waiting) == decided
