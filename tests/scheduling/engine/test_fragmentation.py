"""The fragmentation measure (scheduling/engine/fragmentation.py) on examples small enough to check by hand."""

import math

import pytest

from scheduling.engine.fragmentation import TaskShape, Workload

EIGHT = TaskShape(8)
ONE = TaskShape(1)
TWO = TaskShape(2)
THIRD = TaskShape(1, 300)  # 0.3 of a GPU


def workload(*weighted):
    return Workload(weighted)


def test_eight_free_gpus_under_eight_gpu_tasks_are_not_fragmented():
    assert workload((EIGHT, 1)).node_fragmentation([1000] * 8) == 0


def test_half_a_gpu_under_whole_gpu_tasks_is_all_fragment():
    assert workload((ONE, 1)).node_fragmentation([500]) == pytest.approx(0.5)


def test_half_a_gpu_under_a_mix_of_whole_and_shared_tasks():
    # 1-GPU tasks cannot use the half GPU (0.5 x 0.5); 0.3-GPU tasks can (0.5 x 0)
    assert workload((ONE, 1), (THIRD, 1)).node_fragmentation([500]) == pytest.approx(0.25)


def test_a_mixture_with_a_task_that_does_not_fit():
    # free: two whole GPUs and 0.2 of a third. 2-GPU tasks fit and leave the 0.2 unusable; 0.3-GPU tasks fit
    # and cannot use the 0.2 either; 8-GPU tasks do not fit, so all 2.2 free GPUs are unusable to them.
    mix = workload((TWO, 1), (THIRD, 1), (EIGHT, 2))
    assert mix.node_fragmentation([1000, 1000, 200]) == pytest.approx(0.25 * 0.2 + 0.25 * 0.2 + 0.5 * 2.2)


def test_a_busy_node_with_nothing_free_has_nothing_fragmented():
    assert workload((ONE, 1), (THIRD, 1)).node_fragmentation([0, 0, 0, 0]) == 0


def test_shared_task_needs_its_share_on_one_gpu():
    # 0.2 + 0.2 free on two GPUs: a 0.3-GPU task fits on neither, so both fragments are unusable
    assert workload((THIRD, 1)).node_fragmentation([200, 200]) == pytest.approx(0.4)
    # one GPU with 0.4 free: it fits there; the other GPU's 0.2 stays unusable
    assert workload((THIRD, 1)).node_fragmentation([400, 200]) == pytest.approx(0.2)


def test_cpu_and_memory_strand_gpus():
    hungry = TaskShape(1, cpu_milli=4000, memory_mib=8192)
    mix = workload((hungry, 1))
    assert mix.node_fragmentation([1000] * 8, cpu_free=2000, memory_free=65536) == pytest.approx(8)
    assert mix.node_fragmentation([1000] * 8, cpu_free=8000, memory_free=4096) == pytest.approx(8)
    assert mix.node_fragmentation([1000] * 8, cpu_free=8000, memory_free=65536) == 0


def test_cpu_only_tasks_fragment_nothing_where_they_fit():
    cpu_only = TaskShape(0, 0, cpu_milli=4000)
    assert workload((cpu_only, 1)).node_fragmentation([300, 1000], cpu_free=8000) == 0
    assert workload((cpu_only, 1)).node_fragmentation([300, 1000], cpu_free=1000) == pytest.approx(1.3)


def test_gpu_model_constraints():
    v100_only = TaskShape(1, models=("V100",))
    mix = workload((v100_only, 1), (ONE, 1))
    assert mix.node_fragmentation([1000, 1000], model="T4") == pytest.approx(0.5 * 2)
    assert mix.node_fragmentation([1000, 1000], model="V100") == 0
    # alone, the V100-only task can use nothing of a T4 and all of a V100
    assert workload((v100_only, 1)).node_fragmentation([1000], math.inf, math.inf, "T4") == pytest.approx(1.0)
    assert workload((v100_only, 1)).node_fragmentation([1000], math.inf, math.inf, "V100") == 0


def test_popularity_and_memo():
    popular = Workload.from_tasks([ONE, ONE, EIGHT])
    assert dict(popular.shapes) == {ONE: pytest.approx(2 / 3), EIGHT: pytest.approx(1 / 3)}
    # 4 whole free: 1-GPU tasks fit (nothing unusable), 8-GPU tasks do not (all 4 unusable)
    assert popular.node_fragmentation([1000] * 4) == pytest.approx(4 / 3)
    hungry = Workload([(TaskShape(1, cpu_milli=4000), 1)])
    # free CPU counts only through which demands it covers: 5000 and 7000 share a memo entry, 3000 does not
    assert hungry.node_fragmentation([1000], cpu_free=5000) == hungry.node_fragmentation([1000], cpu_free=7000) == 0
    assert hungry.node_fragmentation([1000], cpu_free=3000) == pytest.approx(1)
    # the GPU order does not matter
    assert popular.node_fragmentation([500, 1000]) == popular.node_fragmentation([1000, 500])


def test_a_workload_needs_weight():
    with pytest.raises(ValueError):
        Workload([])
    with pytest.raises(ValueError):
        Workload([(ONE, -1)])
