"""A Slurm cluster as a whole in the monthly report, the review pack and ``/metrics``: the portal's allocations on
it beside the work submitted to Slurm directly, per tenant and per unmapped account, with slurmdb's own totals."""

from datetime import date

import pytest

from fleet.models import Cluster, ExecutorKind
from metering.metrics import samples
from metering.reports.monthly import build_report
from metering.reports.presentation import report_sections, section_by_name
from metering.review.document import build_review
from metering.usage.rollup import rollup
from metering.usage.slurm import import_accounting
from scheduling.models import JobEvent, JobStatus
from tests.factories import make_node
from tests.metering.helpers import at, gpus_of, ran_job
from tests.metering.usage.test_slurm import accounted

MONTH = date(2026, 10, 1)
NOW = at("2026-10-20T12:00")


@pytest.fixture
def slurm_month(users):
    cluster = Cluster.objects.create(name="sx", executor=ExecutorKind.SLURM, slurm_url="http://127.0.0.1:1",
                                     slurm_accounts={"vision": "vision"})
    make_node(cluster, "sx-h100-1", "H100")
    # The portal's job: 2 GPUs for 2 h from its allocations, and slurmdb's record of it (its id the one the portal
    # stored when it dispatched the job; the comment only names the candidate).
    portal = ran_job(users["alice"], "vision/detection", gpus_of("sx-h100-1", 2), at("2026-10-14T08:00"),
                     at("2026-10-14T10:00"))
    dispatched = portal.events.get(to_status=JobStatus.DISPATCHING)  # what dispatch stores of the Slurm job it made
    dispatched.data = {**dispatched.data, "cluster": "sx", "slurm_job_id": "1"}
    dispatched.save(update_fields=["data"])
    rollup(date(2026, 10, 14), date(2026, 10, 14), now=NOW, force=True)
    jobs = [accounted(1, "2026-10-14T08:00", "2026-10-14T10:00", comment="gpuportal job 1 attempt 1"),
            accounted(2, "2026-10-14T12:00", "2026-10-14T13:00", gpus=3),  # vision, submitted directly
            accounted(3, "2026-10-15T12:00", "2026-10-15T14:00", gpus=1, account="nlp", user="nobody")]
    import_accounting(cluster, at("2026-10-14T00:00"), at("2026-10-16T00:00"), now=NOW, jobs=jobs)
    return cluster


def test_the_platform_report_covers_the_whole_cluster(slurm_month):
    report = build_report(MONTH, now=NOW)
    [cluster] = report["slurm"]
    assert (cluster["portal_gpu_hours"], cluster["outside_gpu_hours"], cluster["total_gpu_hours"]) == (4.0, 5.0, 9.0)
    assert (cluster["slurmdb_gpu_hours"], cluster["slurmdb_portal_gpu_hours"]) == (9.0, 4.0)
    assert [(o["tenant"], o["account"], o["portal_gpu_hours"], o["outside_gpu_hours"], o["outside_jobs"])
            for o in cluster["owners"]] == [("vision", None, 4.0, 3.0, 1), (None, "nlp", 0.0, 2.0, 1)]
    assert report["outside_gpu_hours"] == 5.0
    assert report["gpu_hours_allocated"] == 4.0  # the portal's own figure stays the allocations'
    section = section_by_name(report_sections(report), "slurm")
    assert [row[1] for row in section.table()] == ["vision", "unmapped account nlp"]
    assert "slurmdb accounted 9.0 GPU-hours, 4.0 of them for jobs the portal submitted" in section.note


def test_a_tenants_report_shows_its_own_accounts_only(slurm_month, world):
    report = build_report(MONTH, world["tenants"]["vision"], now=NOW)
    [cluster] = report["slurm"]
    assert [(o["tenant"], o["total_gpu_hours"]) for o in cluster["owners"]] == [("vision", 7.0)]
    assert build_report(MONTH, world["tenants"]["speech"], now=NOW)["slurm"] == []


def test_the_review_pack_and_metrics_show_the_outside_work(slurm_month):
    resources = next(g for g in build_review(MONTH, language="en", now=NOW).groups if g.key == "resources")
    assert resources.table("slurm").rows == [["sx", "vision", 4.0, 3.0, 7.0, 1],
                                             ["sx", "unmapped account nlp", 0.0, 2.0, 2.0, 1]]
    assert any(line.startswith("sx: 4.0 GPU-hours allocated by the portal and 5.0 held by work submitted")
               for line in resources.conclusions)
    outside = {tuple(sorted(labels.items())): value for name, labels, value in samples(NOW)
               if name == "gpuportal_outside_gpu_seconds"}
    assert outside == {(("account", "nlp"), ("cluster", "sx"), ("tenant", "")): 7200.0,
                       (("account", "vision"), ("cluster", "sx"), ("tenant", "vision")): 10800.0}


def test_a_tenants_report_compares_its_own_share_with_slurmdbs(slurm_month, world):
    # The portal's job ran under an account no tenant is mapped to, and slurmdb kept no comment: the dispatch
    # record makes it the portal's and its tenant's, so both sides of the tenant's cross-check hold the same jobs.
    dispatched = JobEvent.objects.get(job__name="research-0800", to_status=JobStatus.DISPATCHING)
    dispatched.data = {**dispatched.data, "cluster": "sx", "slurm_job_id": "1"}
    dispatched.save(update_fields=["data"])
    jobs = [accounted(1, "2026-10-14T08:00", "2026-10-14T10:00", account="nlp", user="alice"),
            accounted(2, "2026-10-14T12:00", "2026-10-14T13:00", gpus=3),
            accounted(3, "2026-10-15T12:00", "2026-10-15T14:00", gpus=1, account="nlp", user="nobody")]
    import_accounting(slurm_month, at("2026-10-14T00:00"), at("2026-10-16T00:00"), now=NOW, jobs=jobs)
    vision = world["tenants"]["vision"]
    report = build_report(MONTH, vision, now=NOW)
    [cluster] = report["slurm"]
    assert (cluster["portal_gpu_hours"], cluster["outside_gpu_hours"], cluster["total_gpu_hours"]) == (4.0, 3.0, 7.0)
    assert (cluster["slurmdb_gpu_hours"], cluster["slurmdb_portal_gpu_hours"]) == (7.0, 4.0)
    said = ("sx, tenant vision only: 4.0 GPU-hours allocated by the portal to the tenant's jobs and 3.0 held by work "
            "its Slurm accounts submitted directly, 7.0 in all; slurmdb accounted 7.0 GPU-hours for the same jobs, "
            "4.0 of them for jobs the portal submitted.")
    assert section_by_name(report_sections(report), "slurm").note == said
    resources = next(g for g in build_review(MONTH, vision, language="en", now=NOW).groups if g.key == "resources")
    assert said in resources.conclusions
    # The platform's report still reads the whole cluster.
    [whole] = build_report(MONTH, now=NOW)["slurm"]
    assert (whole["slurmdb_gpu_hours"], whole["slurmdb_portal_gpu_hours"], whole["outside_gpu_hours"]) == (
        9.0, 4.0, 5.0)
