"""Slurm accounting against a real slurmdb: a job the portal dispatched and jobs submitted to Slurm directly (by
``daemon``, account vision, mapped to the tenant vision; by ``nobody``, account nlp, left unmapped) are imported,
and the monthly report's GPU-hours for the cluster are compared with what slurmdb itself answers."""

import time
import urllib.parse
from datetime import datetime

import pytest
from django.utils import timezone

from gpuportal.text.dates import day_start, local_day, month_start
from metering.metrics import samples
from metering.reports.monthly import build_report
from metering.reports.presentation import owner_label
from metering.usage.rollup import rollup
from metering.usage.slurm import import_accounting
from scheduling.models import JobStatus
from tests.factories import make_node
from tests.slurm.world import follow_until, slurm_lab, submit

FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}


@pytest.fixture
def lab(world, slurm_clean):
    lab = slurm_lab(world, slurm_clean)
    lab["cluster"].slurm_accounts = {"vision": "vision"}
    lab["cluster"].save(update_fields=["slurm_accounts"])
    make_node(lab["cluster"], "sx-a100-1", "A100", gpus=8)
    make_node(lab["cluster"], "sx-a100-2", "A100", gpus=4)
    return lab


def slurmdb_jobs(slurm, since: datetime) -> list[dict]:
    """slurmdb's raw answer for every job since ``since`` (a Slurm time in the cluster's local time: 22.05 refuses
    a Unix time there)."""
    stamp = urllib.parse.quote(datetime.fromtimestamp(since.timestamp()).strftime("%Y-%m-%dT%H:%M:%S"))
    return slurm.rest(f"/slurmdb/v0.0.38/jobs?start_time={stamp}").get("jobs") or []


def gpu_seconds(raw: dict) -> int:
    """slurmdb's own figure of a job: its allocated gres/gpu count times its elapsed seconds."""
    gpus = sum(t["count"] or 0 for t in raw["tres"]["allocated"] if t["type"] == "gres" and t["name"] == "gpu")
    return gpus * raw["time"]["elapsed"]


def test_the_reports_gpu_hours_for_the_cluster_are_slurmdbs(lab, slurm_clean):
    slurm, cluster = slurm_clean, lab["cluster"]
    began = timezone.now()
    out = [f"--output={slurm.output_dir}/acct-%j.out", f"--chdir={slurm.output_dir}"]
    portal = submit(lab["alice"], "sleep 2")
    vision = int(slurm.sbatch("--gres=gpu:a100:3", "-w", "sx-a100-1", *out, "--wrap", "sleep 2", user="daemon"))
    nlp = int(slurm.sbatch("--gres=gpu:a100:2", "-w", "sx-a100-2", *out, "--wrap", "sleep 1", user="nobody"))
    portal = follow_until(portal, (JobStatus.SUCCEEDED, JobStatus.FAILED))
    assert portal.status == JobStatus.SUCCEEDED
    portal_id = int(portal.executor_state["slurm_job_id"])
    ours = {portal_id, vision, nlp}
    first = day_start(local_day(began))
    deadline = time.monotonic() + 20  # slurmdb records a job within about a second of its end
    while {j["job_id"] for j in slurmdb_jobs(slurm, first) if j["state"]["current"] in FINISHED} < ours:
        assert time.monotonic() < deadline, "slurmdb did not record the jobs"
        time.sleep(0.3)

    result = import_accounting(cluster, began, timezone.now())
    raw = {j["job_id"]: gpu_seconds(j) for j in slurmdb_jobs(slurm, first)}  # every job of the day, ours included
    assert result.first_day == local_day(began) and result.jobs_read == len(raw)
    rollup(local_day(began), local_day(timezone.now()), force=True)
    [usage] = [c for c in build_report(month_start(local_day(began)))["slurm"] if c["cluster"] == cluster.name]

    # The cross-check: the report's slurmdb figures are slurmdb's own, to the second.
    assert usage["slurmdb_gpu_seconds"] == sum(raw.values()) > 0
    assert usage["outside_gpu_seconds"] == sum(raw.values()) - raw[portal_id]
    assert raw[portal_id] >= 2 * 2 and usage["slurmdb_portal_gpu_hours"] == round(raw[portal_id] / 3600, 2)
    # The whole cluster: the portal's allocations (held from admission until it saw the end, so at least what
    # slurmdb counted for its job, less the second slurmdb may add per GPU: it keeps whole seconds of start and
    # end, so a run of 2.2 s can read as 3) plus the work submitted directly.
    assert usage["portal_gpu_seconds"] >= raw[portal_id] - portal.total_gpus * 1
    assert usage["total_gpu_hours"] == round((usage["portal_gpu_seconds"] + usage["outside_gpu_seconds"]) / 3600, 2)
    owners = {owner_label(o): o for o in usage["owners"]}
    assert owners["unmapped account nlp"]["outside_jobs"] >= 1 and owners["unmapped account nlp"]["tenant"] is None
    assert owners["vision"]["outside_jobs"] >= 1
    print(f"accounting cross-check: slurmdb {sum(raw.values())} GPU-s, report {usage['slurmdb_gpu_seconds']} GPU-s "
          f"({len(raw)} jobs)")  # the figure the closing note gives

    gauge = {labels["account"]: value for name, labels, value in samples()
             if name == "gpuportal_outside_gpu_seconds" and labels["cluster"] == cluster.name}
    assert gauge["nlp"] >= raw[nlp] >= 2 and gauge["vision"] >= raw[vision] >= 3
    assert sum(gauge.values()) == usage["outside_gpu_seconds"]
