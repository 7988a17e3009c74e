"""The Slurm accounting import without a cluster: slurmdb's answer is given as ``AccountedJob``s, so day splitting,
models, tenants, the portal's own jobs (also after a requeue) and idempotence are checked exactly; and how
slurmdb's GPU TRES are read."""

from datetime import date

import pytest

from fleet.models import Cluster, ExecutorKind
from metering.models import CapacityDaily, ClusterAccountingDaily
from metering.usage.rollup import rollup
from metering.usage.slurm import import_accounting
from scheduling import lifecycle
from scheduling.executors.slurm.adapters import V0038
from scheduling.executors.slurm.shapes import AccountedJob
from scheduling.models import Job, JobStatus, TaskType
from scheduling.passes import dispatch
from tenants.models import Project
from tests.factories import make_node
from tests.metering.helpers import at, gpus_of, hold, ran_job

NOW = at("2026-10-16T12:00")


def accounted(job_id: int, start: str, end: str | None, gpus: int = 2, nodes=("sx-h100-1",), account="vision",
              user="daemon", gpu_type="h100", comment="") -> AccountedJob:
    began, ended = at(start), at(end) if end else None
    return AccountedJob(job_id=job_id, name=f"job{job_id}", user=user, account=account, partition="gpu",
                        state="COMPLETED" if ended else "RUNNING", reason="None", return_code=0, signal=None,
                        nodes=tuple(nodes), gpus=gpus, gpu_type=gpu_type, submit_time=began, start_time=began,
                        end_time=ended, elapsed_seconds=int(((ended or NOW) - began).total_seconds()),
                        comment=comment)


@pytest.fixture
def slurm_cluster(world):
    cluster = Cluster.objects.create(name="sx", executor=ExecutorKind.SLURM, slurm_url="http://127.0.0.1:1",
                                     slurm_accounts={"vision": "vision", "ghost": "no-such-tenant"},
                                     slurm_models={"A100X": "A100"})
    make_node(cluster, "sx-h100-1", "H100")
    return cluster


def rows(**filters):
    return list(ClusterAccountingDaily.objects.filter(**filters).order_by("day", "account", "gpu_model").values_list(
        "day", "account", "user_name", "tenant__name", "gpu_model", "from_portal", "gpu_seconds", "jobs_started"))


def test_a_job_over_midnight_is_split_at_midnight_and_counted_once(slurm_cluster):
    job = accounted(1, "2026-10-14T23:00", "2026-10-15T01:30", gpus=4)
    result = import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-16T00:00"), now=NOW, jobs=[job])
    assert rows() == [(date(2026, 10, 14), "vision", "daemon", "vision", "H100", False, 4 * 3600.0, 1),
                      (date(2026, 10, 15), "vision", "daemon", "vision", "H100", False, 4 * 5400.0, 0)]
    assert (result.first_day, result.last_day) == (date(2026, 10, 14), date(2026, 10, 15))
    assert result.outside_gpu_seconds == 4 * 2.5 * 3600 and result.portal_gpu_seconds == 0
    assert (result.jobs_read, result.jobs_counted, result.rows) == (1, 1, 2)


def test_importing_again_replaces_the_window_and_leaves_other_days(slurm_cluster):
    first = [accounted(1, "2026-10-14T10:00", "2026-10-14T11:00"), accounted(2, "2026-10-15T10:00", "2026-10-15T12:00")]
    import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-16T00:00"), now=NOW, jobs=first)
    before = rows()
    import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-16T00:00"), now=NOW, jobs=first)
    assert rows() == before and len(before) == 2
    # A window of the 15th only (its end mid-day widens to the whole day): the 14th keeps its row.
    shorter = [accounted(2, "2026-10-15T10:00", "2026-10-15T11:00")]
    import_accounting(slurm_cluster, at("2026-10-15T00:00"), at("2026-10-15T18:00"), now=NOW, jobs=shorter)
    assert [(day, seconds) for day, *_k, seconds, _n in rows()] == [(date(2026, 10, 14), 7200.0),
                                                                   (date(2026, 10, 15), 7200.0)]


def test_a_job_begun_before_the_window_counts_its_part_inside_and_no_start(slurm_cluster):
    job = accounted(3, "2026-10-13T22:00", "2026-10-14T02:00", gpus=1)
    import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-15T00:00"), now=NOW, jobs=[job])
    assert [(day, seconds, started) for day, *_k, seconds, started in rows()] == [(date(2026, 10, 14), 7200.0, 0)]


def test_a_running_job_counts_until_now(slurm_cluster):
    job = accounted(4, "2026-10-16T10:00", None, gpus=8)
    import_accounting(slurm_cluster, at("2026-10-16T00:00"), NOW, now=NOW, jobs=[job])
    assert [seconds for *_k, seconds, _n in rows()] == [8 * 7200.0]


def test_models_tenants_and_a_forged_comment(slurm_cluster):
    jobs = [accounted(5, "2026-10-14T10:00", "2026-10-14T11:00", nodes=("sx-unknown",), gpu_type="a100x",
                      account="nlp", user="nobody"),
            accounted(6, "2026-10-14T10:00", "2026-10-14T11:00", nodes=("sx-unknown",), gpu_type="l40s",
                      account="ghost"),
            accounted(7, "2026-10-14T10:00", "2026-10-14T10:30", comment="gpuportal job 42 attempt 1"),  # forged
            accounted(8, "2026-10-14T09:00", None, gpus=0),  # no GPU: nothing to count
            accounted(9, "2026-10-14T09:00", "2026-10-14T09:00")]  # ended as it started: a start, no seconds
    result = import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-15T00:00"), now=NOW, jobs=jobs)
    day = date(2026, 10, 14)
    assert rows() == [
        (day, "ghost", "daemon", None, "L40S", False, 7200.0, 1),  # the catalogue's name, whatever the case
        (day, "nlp", "nobody", None, "A100", False, 7200.0, 1),  # the cluster's own mapping of the GRES type
        # the portal's tag in a comment, with no record of the portal's behind it, is work submitted directly
        (day, "vision", "daemon", "vision", "H100", False, 3600.0, 2)]
    assert result.unmapped_accounts == ["ghost", "nlp"]
    assert (result.portal_gpu_seconds, result.outside_gpu_seconds) == (0.0, 18000.0)


def test_a_job_the_portal_dispatched_is_its_own_even_where_slurmdb_kept_no_comment(slurm_cluster, users):
    job = ran_job(users["alice"], "vision/detection", gpus_of("sx-h100-1", 1), at("2026-10-14T08:00"),
                  at("2026-10-14T09:00"))
    Job.objects.filter(pk=job.pk).update(executor_state={"slurm_job_id": "10"})
    jobs = [accounted(10, "2026-10-14T08:00", "2026-10-14T09:00", gpus=1),
            accounted(11, "2026-10-14T08:00", "2026-10-14T09:00", gpus=1)]
    result = import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-15T00:00"), now=NOW, jobs=jobs)
    assert [portal for *_k, portal, _s, _n in rows()] == [False, True]
    assert (result.portal_gpu_seconds, result.outside_gpu_seconds) == (3600.0, 3600.0)


def test_outside_work_counts_as_allocated_capacity_in_the_rollup(slurm_cluster):
    job = accounted(11, "2026-10-14T10:00", "2026-10-14T12:00", gpus=4)  # outside: 8 GPU-hours
    import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-15T00:00"), now=NOW, jobs=[job])
    rollup(date(2026, 10, 14), date(2026, 10, 14), now=NOW, force=True)
    capacity = CapacityDaily.objects.get(day=date(2026, 10, 14), gpu_model="H100")
    assert capacity.allocated_gpu_seconds == 4 * 7200.0  # the portal holds nothing in this world


class _Submits:
    """Stands in for the Slurm executor at dispatch: each submit answers the next Slurm id, as slurmrestd would."""

    def __init__(self, *ids: str):
        self.ids = list(ids)

    def dispatch(self, job):
        return {"slurm_job_id": self.ids.pop(0), "user": "daemon"}


def test_a_requeued_jobs_earlier_attempt_stays_the_portals_without_a_comment(slurm_cluster, users, monkeypatch):
    project = Project.objects.get(tenant__name="vision", name="detection")
    job = lifecycle.create_job(
        status=JobStatus.QUEUED, reason="test", tenant=project.tenant, project=project, owner=users["alice"],
        task_type=TaskType.objects.get(code="research"), gpu_model="H100", name="requeued", gpus_per_node=1,
        node_count=1, image="img", max_runtime_minutes=60, priority=1, submitted_at=at("2026-10-14T07:50"))
    other = Cluster.objects.create(name="sx2", executor=ExecutorKind.SLURM, slurm_url="http://127.0.0.1:2")
    make_node(other, "sx2-h100-1", "H100")
    monkeypatch.setattr(dispatch, "executor_for", lambda cluster: _Submits("20" if cluster.name == "sx" else "21"))
    hold(job, gpus_of("sx-h100-1", 1), at("2026-10-14T08:00"))
    dispatch.dispatch_many([job.pk])  # the first attempt: Slurm job 20 on sx
    job.refresh_from_db()
    lifecycle.transition(job, JobStatus.QUEUED, "preempted", retry_count=1, cluster=None, executor_state={})
    hold(job, gpus_of("sx2-h100-1", 1), at("2026-10-14T09:00"))
    dispatch.dispatch_many([job.pk])  # the second attempt: Slurm job 21 on sx2, whose id sx also uses below
    job.refresh_from_db()
    assert job.cluster == other and job.executor_state["slurm_job_id"] == "21"

    jobs = [accounted(20, "2026-10-14T08:00", "2026-10-14T09:00", gpus=1, account="nlp"),  # no comment kept
            accounted(21, "2026-10-14T10:00", "2026-10-14T11:00", gpus=1, account="nlp")]  # sx's own job 21
    result = import_accounting(slurm_cluster, at("2026-10-14T00:00"), at("2026-10-15T00:00"), now=NOW, jobs=jobs)
    # Job 20 is the portal's (the portal job's tenant, not the unmapped account's); sx's job 21 is outside work.
    assert [(tenant, portal, seconds) for _d, _a, _u, tenant, _m, portal, seconds, _n in rows()] == [
        (None, False, 3600.0), ("vision", True, 3600.0)]
    assert (result.portal_gpu_seconds, result.outside_gpu_seconds) == (3600.0, 3600.0)
    assert result.unmapped_accounts == ["nlp"]


def test_typed_and_untyped_gpu_tres_count_each_gpu_once():
    def gpus(*allocated):
        record = V0038().accounted({"job_id": 1, "tres": {"allocated": [
            {"type": "gres", "name": name, "count": count} for name, count in allocated]}})
        return record.gpus, record.gpu_type

    # AccountingStorageTRES=gres/gpu,gres/gpu:h100: both entries name the same 4 GPUs
    assert gpus(("gpu", 4), ("gpu:h100", 4)) == (4, "h100")
    assert gpus(("gpu", 3)) == (3, "")  # gres/gpu only: untyped
    assert gpus(("gpu:h100", 2), ("gpu:a100", 1)) == (3, "h100")  # typed only: they add up
