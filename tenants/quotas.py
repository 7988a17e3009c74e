"""The one effective-quota rule: what a tenant may hold of a GPU model right now.

**Effective limit** = the quota's ``limit_gpus`` + the ``extra_gpus`` of every burst of that tenant and model
active now (``start <= now < end``). The guarantee is never raised by a burst.

**How a job counts against it**: every GPU a job holds counts as one GPU, whether it holds the whole GPU or a
share of it. A share still takes one device out of the tenant's hands (Kubernetes counts one
``nvidia.com/gpu`` request per shared device under the default sharing map, and so does a node's device
plugin), so the quota counts what the cluster counts: a 0.25 share of one GPU uses 1 of the limit.
Fair share, metering and cost still count the fraction (they measure GPU-time, not holdings).

The scheduling pass, the dashboard bar, the quota API, the tenant's Kubernetes ResourceQuota and
``k8s_manifests`` all read the limit from here; none adds bursts by itself.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from .models import Quota, QuotaBurst


@dataclass(frozen=True)
class EffectiveQuota:
    tenant: str
    gpu_model: str
    guaranteed: int
    limit: int  # as configured
    burst: int = 0  # extra GPUs of the bursts active now
    department: str = ""

    @property
    def effective_limit(self) -> int:
        return self.limit + self.burst


def quota_gpus(gpus_per_node: int, node_count: int) -> int:
    """What a job of this size counts against its tenant's quota: one per GPU held, shares included."""
    return gpus_per_node * node_count


def active_bursts(now: datetime | None = None, tenant_names=None) -> dict[tuple[str, str], int]:
    """(tenant, model) -> extra GPUs of the bursts active at ``now``."""
    now = now or timezone.now()
    rows = QuotaBurst.objects.filter(start__lte=now, end__gt=now)
    if tenant_names is not None:
        rows = rows.filter(tenant__name__in=list(tenant_names))
    bursts: dict[tuple[str, str], int] = defaultdict(int)
    for tenant, model, extra in rows.values_list("tenant__name", "gpu_model", "extra_gpus"):
        bursts[(tenant, model)] += extra
    return dict(bursts)


def effective_quotas(quotas=None, now: datetime | None = None) -> list[EffectiveQuota]:
    """Every quota row (or those of ``quotas``, a Quota queryset) with its active bursts. Read as plain values: every
    scheduling pass and every dashboard reads them all, and three model instances a row cost most of it."""
    rows = list((quotas if quotas is not None else Quota.objects.all()).values_list(
        "tenant__name", "gpu_model", "guaranteed_gpus", "limit_gpus", "tenant__department__name"))
    bursts = active_bursts(now, None if quotas is None else {row[0] for row in rows})
    return [EffectiveQuota(tenant, model, guaranteed, limit, bursts.get((tenant, model), 0), department or "")
            for tenant, model, guaranteed, limit, department in rows]


def tenant_gpu_limit(tenant, now: datetime | None = None) -> int:
    """All models together (the Kubernetes executor enforces it per vendor's extended resource:
    ``tenant_device_limits``)."""
    return sum(q.effective_limit for q in effective_quotas(Quota.objects.filter(tenant=tenant), now))


def set_quota(tenant, gpu_model: str, guaranteed: int, limit: int) -> Quota:
    """Create or change a tenant's quota for a model (an approved quota request, the admin)."""
    quota, _created = Quota.objects.update_or_create(tenant=tenant, gpu_model=gpu_model, defaults={
        "guaranteed_gpus": guaranteed, "limit_gpus": limit})
    return quota


def grant_burst(tenant, gpu_model: str, extra_gpus: int, start: datetime, end: datetime, granted_by=None) -> QuotaBurst:
    """Raise a tenant's limit for a model from ``start`` to ``end`` (an approved burst request)."""
    return QuotaBurst.objects.create(tenant=tenant, gpu_model=gpu_model, extra_gpus=extra_gpus, start=start, end=end,
                                     granted_by=granted_by)
