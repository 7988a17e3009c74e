"""The one effective-quota rule (tenants.quotas): limit + active bursts, and a share counting as one GPU."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import engine
from tenants.models import Department, Quota
from tenants.quotas import effective_quotas, grant_burst, quota_gpus, tenant_gpu_limit
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def test_effective_limit_adds_only_the_bursts_active_now():
    tenant = make_tenant("optics", quotas={"A100": (4, 8), "H100": (0, 2)})
    now = timezone.now()
    grant_burst(tenant, "A100", 4, now - timedelta(hours=1), now + timedelta(hours=1))
    grant_burst(tenant, "A100", 100, now + timedelta(hours=2), now + timedelta(hours=3))  # not yet
    grant_burst(tenant, "A100", 100, now - timedelta(hours=3), now - timedelta(hours=2))  # over
    rows = {q.gpu_model: q for q in effective_quotas(Quota.objects.filter(tenant=tenant), now)}
    assert (rows["A100"].limit, rows["A100"].burst, rows["A100"].effective_limit) == (8, 4, 12)
    assert rows["A100"].guaranteed == 4  # a burst never raises the guarantee
    assert rows["H100"].effective_limit == 2
    assert tenant_gpu_limit(tenant, now) == 14  # what the tenant's Kubernetes ResourceQuota enforces
    assert tenant_gpu_limit(tenant, now + timedelta(hours=2, minutes=30)) == 110


def test_every_quota_is_read_with_its_department_and_its_tenants_bursts():
    physics = Department.objects.create(name="physics")
    optics = make_tenant("optics", quotas={"A100": (4, 8)})
    make_tenant("lone", quotas={"A100": (1, 2)})
    optics.department = physics
    optics.save()
    now = timezone.now()
    grant_burst(optics, "A100", 4, now - timedelta(hours=1), now + timedelta(hours=1))
    grant_burst(make_tenant("quotaless"), "A100", 9, now - timedelta(hours=1), now + timedelta(hours=1))
    rows = {q.tenant: q for q in effective_quotas(now=now)}
    assert set(rows) == {"optics", "lone"}  # a burst without a quota adds no row
    assert (rows["optics"].department, rows["optics"].effective_limit) == ("physics", 12)
    assert (rows["lone"].department, rows["lone"].effective_limit) == ("", 2)


def test_a_share_counts_as_one_gpu_against_the_quota_in_the_engine_and_the_rule():
    assert quota_gpus(1, 1) == 1 and quota_gpus(4, 2) == 8
    share = engine.WaitingJob(id=1, tenant="t", gpu_model="A100", gpus_per_node=1, gpu_milli=250)
    assert share.quota_gpus == quota_gpus(1, 1) == 1 and share.gpus == 0.25
    running = engine.RunningJob(id=2, tenant="t", gpu_model="A100",
                                placements=(engine.Placement(7, (0,), 500), engine.Placement(8, (1, 2), 1000)))
    assert running.quota_gpus == 3 and running.gpus == 2.5


def test_the_pass_refuses_a_share_once_the_limit_is_held_by_shares():
    node = engine.NodeSnapshot(id=1, name="n1", gpu_model="A100", gpu_indices=tuple(range(8)))
    running = engine.RunningJob(id=1, tenant="t", gpu_model="A100", placements=(engine.Placement(1, (0,), 250),))
    waiting = engine.WaitingJob(id=2, tenant="t", gpu_model="A100", gpus_per_node=1, gpu_milli=250)
    snapshot = engine.Snapshot(nodes=(node,), running=(running,), waiting=(waiting,),
                               quotas=(engine.QuotaSnapshot("t", "A100", 1, 1),), tenants=(engine.TenantInfo("t", 1),))
    result = engine.schedule(snapshot)
    assert not result.admissions  # 0.25 + 0.25 would fit a fractional count; the rule counts 2 GPUs held
    assert result.waiting[0].reason.value in ("quota_exhausted", "borrowing_limit")
