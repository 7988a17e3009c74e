"""The demo's history holds multi-node runs as a site's month does: two whole H100 nodes at once, most of them
succeeding, and a cross-node communication failure that the diagnosis localises to a node and the retry rule
moves away from. Like the other tests here, these read the demo's seed: they test the demo itself (its months,
seeded once for the session: conftest.py)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from fleet.models import Node
from metering.acceptance import checklist as acceptance
from scheduling.models import FailureCategory, Job, JobAllocation, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def _attempt_nodes(job: Job) -> list[set[str]]:
    """The nodes of each attempt of ``job``, in order (an attempt's GPUs are allocated at one moment)."""
    by_start = defaultdict(set)
    for allocation in job.allocations.all():
        by_start[allocation.allocated_at].add(allocation.gpu.node.name)
    return [by_start[at] for at in sorted(by_start)]


def _overlaps() -> list[str]:
    """Pairs of allocations of one GPU whose time ranges overlap (the calendar must never share a GPU)."""
    found = []
    by_gpu = defaultdict(list)
    for row in JobAllocation.objects.values("gpu_id", "job_id", "allocated_at", "released_at"):
        by_gpu[row["gpu_id"]].append(row)
    for gpu_id, rows in by_gpu.items():
        rows.sort(key=lambda row: row["allocated_at"])
        for before, after in zip(rows, rows[1:], strict=False):
            if before["released_at"] is None or after["allocated_at"] < before["released_at"]:
                found.append(f"GPU {gpu_id}: job #{before['job_id']} and job #{after['job_id']}")
    return found


def test_the_seeded_months_have_gang_placed_multi_node_runs_and_a_localised_communication_failure(demo_months):
    multi = list(Job.objects.filter(node_count__gte=2).select_related("project__tenant")
                 .prefetch_related("allocations__gpu__node").order_by("submitted_at"))
    assert len(multi) >= 2, [job.pk for job in multi]
    assert {(job.project.tenant.name, job.project.name, job.gpu_model, job.node_count, job.gpus_per_node)
            for job in multi} == {("nlp", "llm-pretrain", "H100", 2, 8)}
    assert all(job.status == JobStatus.SUCCEEDED for job in multi), [(job.pk, job.status) for job in multi]
    for job in multi:  # every attempt on two whole nodes at once
        attempts = _attempt_nodes(job)
        assert len(attempts) == job.retry_count + 1, (job.pk, attempts)
        assert all(len(nodes) == 2 for nodes in attempts), (job.pk, attempts)
        assert job.allocations.count() == 16 * len(attempts)
        assert job.allocations.filter(released_at__isnull=True).count() == 0

    first = multi[0]  # the first multi-node run of the history always loses its network once
    (failed,) = [a for a in first.executor_state["attempts"] if a["category"] == FailureCategory.COMMUNICATION]
    first_nodes, retry_nodes = _attempt_nodes(first)
    assert failed["node"] in first_nodes, (failed["node"], first_nodes)
    assert failed["node"] not in retry_nodes, "the retry must run away from the node its diagnosis named"
    assert "Watchdog caught collective operation timeout" in failed["evidence"]["log_line"]
    assert first.retry_count == 1
    assert Node.objects.get(name=failed["node"]).pk in first.executor_state["avoid_nodes"]
    assert any(job.retry_count == 0 for job in multi), "most multi-node runs succeed at the first attempt"

    assert not _overlaps()


def test_the_seeded_months_show_the_multi_node_row_of_the_acceptance_checklist_present(demo_months):
    (row,) = [row for row in acceptance.checklist() if row.area == "multi_node"]
    assert row.status == acceptance.Status.PRESENT, row.why
    texts = [item.text for item in row.evidence]
    assert any("communication failure localised to dc1-r" in text for text in texts), texts
    ran = Job.objects.filter(node_count__gte=2, started_at__isnull=False).count()
    assert ran >= 11, ran
    assert not _overlaps()
