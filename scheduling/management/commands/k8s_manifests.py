"""Print the Kubernetes objects a job would get: ``manage.py k8s_manifests --job 42`` or ``--example multi-node``."""

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling.executors.kubernetes import manifests
from scheduling.models import Cluster, Job


class Command(BaseCommand):
    help = "Print, as YAML, the tenant and job objects that dispatch would apply for a job (nothing is applied)."

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--job", type=int, help="A job's id (it needs a placement: admitted, running or ended).")
        group.add_argument("--example", choices=manifests.EXAMPLES, help="A made-up job of this shape.")

    def handle(self, *args, job=None, example=None, **options):
        if example:
            spec, prefix, share, claim = manifests.example_spec(example), "gp-", None, False
            tenant_objects = [manifests.namespace(prefix, spec.tenant),
                              manifests.resource_quota(prefix, spec.tenant, 16),
                              manifests.network_policy(prefix, spec.tenant)]
            priority = manifests.priority_class(spec.task_type, 80)
        else:
            found = Job.objects.select_related("tenant", "project", "task_type", "cluster").filter(pk=job).first()
            if found is None:
                raise CommandError(f"--job: no job #{job}.")
            allocations = list(found.allocations.select_related("gpu__node"))
            if not allocations:
                raise CommandError(f"--job: job #{job} has no placement yet (it is {found.status}); its manifests "
                                   "exist once the scheduler admits it. Try --example multi-node.")
            cluster = found.cluster or Cluster.objects.filter(executor="kubernetes").first()
            prefix = cluster.namespace_prefix if cluster else "gp-"
            share = (cluster.gpu_share_resources or None) if cluster else None
            claim = bool(cluster and cluster.tenant_storage_gib)
            nodes = tuple(sorted({a.gpu.node.name for a in allocations}))
            spec = manifests.JobSpec(
                id=found.pk, attempt=found.retry_count, tenant=found.tenant.name, project=found.project.name,
                task_type=found.task_type.code, image=found.image, command=found.command,
                gpus_per_node=found.gpus_per_node, node_count=found.node_count, nodes=nodes,
                max_runtime_minutes=found.max_runtime_minutes, gpu_milli=found.gpu_milli, cpu_milli=found.cpu_milli,
                memory_mib=found.memory_mib, resume_from=(found.executor_state or {}).get("resume_from", ""))
            limit = sum(q.limit_gpus for q in found.tenant.quotas.all())
            tenant_objects = [manifests.namespace(prefix, spec.tenant),
                              manifests.resource_quota(prefix, spec.tenant, limit),
                              manifests.network_policy(prefix, spec.tenant)]
            if claim:
                tenant_objects.append(manifests.storage_claim(prefix, spec.tenant, cluster.tenant_storage_gib,
                                                              cluster.storage_class))
            priority = manifests.priority_class(found.task_type.code, found.task_type.priority, found.task_type.name)
        objects = [*tenant_objects, priority, *manifests.for_job(
            prefix, spec, settings.PORTAL_URL, "<job token: issued at dispatch>", share_resources=share,
            data_claim=claim)]
        self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False))
