"""A Kubernetes cluster for tests: the fake API server on loopback, a kubeconfig pointing at it, and the
Cluster, Node and GPU rows the scheduler places on (GPU model H200, so the simulated demo cluster, which
has none, never takes these jobs)."""

from contextlib import contextmanager
from dataclasses import dataclass

import yaml

from fleet.models import GPU, Cluster, Node
from kubefake.server import FakeKubernetes
from scheduling.executors.kubernetes import _prepared
from scheduling.executors.kubernetes.connection import forget_clients
from scheduling.executors.kubernetes.sync import ClusterSync
from scheduling.models import Job
from tenants.models import Quota, Tenant

MODEL = "H200"


@dataclass
class KubeCluster:
    fake: FakeKubernetes
    cluster: Cluster
    nodes: list[str]

    def sync(self):
        return ClusterSync(Cluster.objects.get(pk=self.cluster.pk)).resync()

    def objects_of(self, job: Job) -> tuple[str, str]:
        job = Job.objects.get(pk=job.pk)
        return job.executor_state["namespace"], job.executor_state["object"]


def make_cluster(tmp_path, name: str, node_count: int = 4, model: str = MODEL, **fields) -> KubeCluster:
    nodes = [f"{name}-{model.lower()}-{i:02d}" for i in range(1, node_count + 1)]
    fake = FakeKubernetes(nodes=nodes)
    url = fake.start()
    kubeconfig = tmp_path / f"{name}.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig(url, context=f"{name}-ctx")))
    cluster = Cluster.objects.create(name=name, executor="kubernetes", kubeconfig_path=str(kubeconfig),
                                     kube_context=f"{name}-ctx", **fields)
    for node_name in nodes:
        node = Node.objects.create(cluster=cluster, name=node_name, gpu_model=model, datacenter="dc9",
                                   rack=f"{name}-r1", network_domain=f"{name}-ib")
        GPU.objects.bulk_create([GPU(node=node, index=i, uuid=f"GPU-{node_name}-{i}", model=model, memory_mb=141000)
                                 for i in range(8)])
    for tenant, guaranteed, limit in (("vision", 16, 32), ("nlp", 16, 32)):
        Quota.objects.update_or_create(tenant=Tenant.objects.get(name=tenant), gpu_model=model,
                                       defaults={"guaranteed_gpus": guaranteed, "limit_gpus": limit})
    return KubeCluster(fake, cluster, nodes)


def reset_client_caches():
    forget_clients()
    _prepared.clear()


@contextmanager
def served_cluster(tmp_path, settings, name: str, retries: int):
    """A cluster served by the fake API server for the length of a test, with fast retries."""
    settings.KUBERNETES = {**settings.KUBERNETES, "RETRIES": retries, "BACKOFF_SECONDS": 0.01}
    reset_client_caches()
    made = make_cluster(tmp_path, name)
    try:
        yield made
    finally:
        made.fake.stop()
        reset_client_caches()
