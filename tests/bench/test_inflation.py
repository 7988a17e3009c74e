"""The workload-inflation experiment (bench/inflation.py): each policy on a few hand-built nodes, the arrival
sequence, and ``replay_trace --mode inflation``'s JSON at a tiny size."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bench.inflation import POLICIES, Cluster, Placer, Task, arrivals, run
from scheduling.engine import NodeSnapshot
from scheduling.engine.fragmentation import TaskShape, Workload

ONE = TaskShape(1, 1000, 1000, 1024)
EIGHT = TaskShape(8, 1000, 1000, 1024)
THIRD = TaskShape(1, 300, 1000, 1024)


def nodes(*sizes, model="V100"):
    return tuple(NodeSnapshot(i + 1, f"n{i}", model, tuple(range(size)), cpu_milli=64000, memory_mib=262144)
                 for i, size in enumerate(sizes))


def placer(name, cluster, *shapes):
    return Placer(name, cluster, Workload.from_tasks(shapes or (ONE,)), seed=1)


def take(cluster, node, gpus, shape=ONE):
    cluster.take(node, tuple(gpus), shape)


def test_first_fit_takes_the_first_node_that_fits():
    cluster = Cluster(nodes(2, 8))
    assert placer("first-fit", cluster).place(ONE) == (0, (0,))
    assert placer("first-fit", cluster).place(EIGHT) == (1, tuple(range(8)))


def test_best_fit_takes_the_node_left_fullest():
    cluster = Cluster(nodes(8, 8))
    take(cluster, 1, range(4))  # node 1: 4 whole GPUs left
    assert placer("best-fit", cluster).place(TaskShape(2))[0] == 1


def test_dot_product_prefers_the_smallest_alignment():
    cluster = Cluster(nodes(8, 8))
    take(cluster, 0, range(6))  # node 0: 2 of 8 free, node 1: all free
    assert placer("dot-product", cluster).place(ONE)[0] == 0


def test_gpu_packing_prefers_a_shared_gpu_then_a_used_node():
    cluster = Cluster(nodes(8, 8, 4))
    take(cluster, 1, [3], TaskShape(1, 500))  # node 1, GPU 3: half free
    assert placer("gpu-packing", cluster).place(THIRD) == (1, (3,))
    take(cluster, 1, [3], TaskShape(1, 500))  # now full: a 0.3 share goes to a whole GPU of the used node 1
    assert placer("gpu-packing", cluster).place(THIRD)[0] == 1
    fresh = Cluster(nodes(8, 4))
    assert placer("gpu-packing", fresh).place(ONE)[0] == 1  # idle nodes only: the smallest


def test_clustering_groups_tasks_of_one_class():
    cluster = Cluster(nodes(8, 8, 8))
    take(cluster, 0, [0])  # node 0 holds a 1-GPU task
    take(cluster, 1, [0], THIRD)  # node 1 holds a shared-GPU task
    assert placer("clustering", cluster).place(ONE)[0] == 0
    assert placer("clustering", cluster).place(TaskShape(1, 200))[0] == 1
    assert placer("clustering", cluster).place(TaskShape(2))[0] == 2  # no node of its class: an idle one


def test_fgd_keeps_a_whole_node_for_the_eight_gpu_tasks():
    # workload: half 8-GPU, half 1-GPU tasks. On idle node 0 a 1-GPU task strands 7 GPUs for the 8-GPU half
    # (fragmentation 0 -> 3.5); on node 1 (4 whole free) it goes from 2 to 1.5: FGD picks node 1.
    cluster = Cluster(nodes(8, 8))
    take(cluster, 1, range(4))
    assert placer("fgd", cluster, EIGHT, ONE).place(ONE)[0] == 1


def test_fgd_chooses_the_gpu_inside_the_node():
    # GPUs free: [1.0, 0.4]; workload half 1-GPU, half 0.3-GPU. Before: 0.5 x 0.4 = 0.2. The 0.3 share on
    # GPU 1 leaves [1.0, 0.1]: 0.5 x 0.1 + 0.5 x 0.1 = 0.1 (delta -0.1); on GPU 0 it leaves [0.7, 0.4]: no whole
    # GPU for the 1-GPU half, 0.5 x 1.1 = 0.55 (delta +0.35). FGD takes GPU 1.
    cluster = Cluster(nodes(2))
    take(cluster, 0, [1], TaskShape(1, 600))
    assert placer("fgd", cluster, ONE, THIRD).place(THIRD) == (0, (1,))


def test_random_is_seeded_and_places_only_where_it_fits():
    cluster = Cluster(nodes(1, 1, 8, 8))
    picks = [placer("random", cluster).place(TaskShape(4))[0] for _ in range(3)]
    assert set(picks) <= {2, 3} and len(set(picks)) == 1  # the same seed, the same choice


def test_default_is_our_engines_best_fit_packing():
    cluster = Cluster(nodes(8, 8))
    take(cluster, 1, range(7))
    chosen = placer("default", cluster)
    assert chosen.place(ONE) == (1, (7,))


def test_a_task_that_fits_nowhere_is_refused_by_every_policy():
    cluster = Cluster(nodes(4, 4))
    for name in POLICIES:
        assert placer(name, cluster).place(EIGHT) is None, name
    assert placer("fgd", cluster).place(TaskShape(1, models=("A100",))) is None


def test_arrivals_stop_at_the_inflated_capacity():
    tasks = [Task("a", TaskShape(2)), Task("b", TaskShape(1, 500)), Task("c", TaskShape(0, 0, 1000))]
    sampled = arrivals(tasks, capacity_gpus=10, inflation=1.3, seed=7)
    requested = sum(t.shape.gpu_request for t in sampled)
    assert 13 <= requested < 13 + 2 and sum(t.shape.gpu_request for t in sampled[:-1]) < 13
    assert arrivals(tasks, 10, 1.3, seed=7) == sampled
    assert [t.name for t in arrivals(tasks, 10, 1.3, seed=0, order="file")] == ["a", "b", "c"]
    assert [t.name for t in arrivals(tasks, 1, 1.0, seed=0, order="file")] == ["a"]


NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"node-{i},32000,131072,{(8, 4, 2)[i % 3]},{('V100', 'T4')[i % 2]}\n" for i in range(6))
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n" + "".join(
            f"pod-{i},{2000 + 1000 * (i % 3)},4096,{(1, 1, 2, 0, 1, 4)[i % 6]},"
            f"{(1000, 300, 1000, 0, 600, 1000)[i % 6]},{'T4' if i % 7 == 0 else ''},LS,Running,{i},{i + 10},{i}\n"
            for i in range(40)))


@pytest.fixture
def trace(tmp_path):
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    return str(tmp_path / "nodes.csv"), str(tmp_path / "pods.csv")


def command(*args) -> dict | list:
    out = io.StringIO()
    call_command("replay_trace", "--mode", "inflation", *args, stdout=out)
    return json.loads(out.getvalue())


def test_command_prints_every_figure(trace):
    nodes_csv, pods_csv = trace
    figures = command("--nodes", nodes_csv, "--pods", pods_csv, "--policy", "fgd", "--seed", "3", "--inflation", "1.3")
    for key in ("policy", "gpus", "allocation_ratio", "unallocated_gpus", "unallocated_gpus_fragmentation", "curve",
                "tasks_failed", "fragmentation_share"):
        assert key in figures, key
    assert figures["policy"] == "fgd" and figures["gpus"] == 28
    assert figures["allocation_ratio"] == pytest.approx((28 - figures["unallocated_gpus"]) / 28, abs=1e-3)
    assert 0 <= figures["unallocated_gpus_fragmentation"] <= figures["unallocated_gpus"]
    assert figures["arrived_ratio"] >= 1 and figures["arrived_ratio_final"] >= 1.3
    ratios = [point[0] for point in figures["curve"]]
    assert ratios == sorted(ratios) and ratios[-1] >= 1.3
    assert all(0 <= point[1] <= 1 for point in figures["curve"])


def test_command_runs_every_policy_on_the_same_arrivals(trace):
    nodes_csv, pods_csv = trace
    figures = command("--nodes", nodes_csv, "--pods", pods_csv, "--policy", "all", "--seed", "5")
    assert [f["policy"] for f in figures] == list(POLICIES)
    assert len({f["tasks_arrived"] for f in figures}) == 1


def test_file_order_takes_each_task_once_and_is_deterministic(trace):
    nodes_csv, pods_csv = trace
    args = ("--nodes", nodes_csv, "--pods", pods_csv, "--policy", "best-fit", "--order", "file", "--inflation", "5")
    first, second = command(*args), command(*args)
    first.pop("seconds"), second.pop("seconds")
    assert first == second and first["tasks_arrived"] == 40 and first["seed"] is None


def test_sampling_depends_on_the_seed(trace):
    nodes_csv, pods_csv = trace
    runs = [run(nodes_csv, pods_csv, ["first-fit"], seed=seed)[0] for seed in (1, 1, 2)]
    assert runs[0]["curve"] == runs[1]["curve"]
    assert runs[0]["curve"] != runs[2]["curve"]


def test_command_refuses_bad_input(trace):
    nodes_csv, pods_csv = trace
    with pytest.raises(CommandError, match="unknown policy"):
        command("--nodes", nodes_csv, "--pods", pods_csv, "--policy", "tetris")
    with pytest.raises(CommandError, match="--inflation"):
        command("--nodes", nodes_csv, "--pods", pods_csv, "--inflation", "0")
    with pytest.raises(CommandError, match="cannot read"):
        command("--nodes", nodes_csv + ".missing", "--pods", pods_csv)


def test_default_is_given_the_history_share_of_the_pod_list(trace):
    """``--history`` hands ``default`` the first share of the pod list as the site's past job shapes; the
    arrivals, and every other policy, are as without it."""
    nodes_csv, pods_csv = trace
    args = ("--nodes", nodes_csv, "--pods", pods_csv, "--policy", "all", "--order", "file")
    without, half = command(*args, "--history", "0"), command(*args, "--history", "0.5")
    assert without[0]["history_tasks"] == 0 and half[0]["history_tasks"] == 20
    assert {f["tasks_arrived"] for f in without + half} == {without[0]["tasks_arrived"]}
    others = [{k: v for k, v in f.items() if k not in ("seconds", "history_tasks")}
              for f in without + half if f["policy"] != "default"]
    assert others[:len(others) // 2] == others[len(others) // 2:]
    with pytest.raises(CommandError):
        command(*args, "--history", "1.5")


def test_the_default_placer_packs_against_history_and_arrivals():
    cluster = Cluster(nodes(8, 8))
    take(cluster, 1, range(4))  # node 1: 4 whole GPUs free
    # arrivals alone (1-GPU tasks): the fuller node 1; a history of 4-GPU tasks: node 1 must stay able to take
    # one, so node 0
    assert Placer("default", cluster, Workload.from_tasks((ONE,)), seed=1).place(ONE)[0] == 1
    four = TaskShape(4, 1000, 1000, 1024)
    assert Placer("default", cluster, Workload.from_tasks((ONE,)), seed=1, history=(four,) * 9).place(ONE)[0] == 0
