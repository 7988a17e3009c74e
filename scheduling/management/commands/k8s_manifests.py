"""Print the Kubernetes objects a job would get: ``manage.py k8s_manifests --job 42`` or ``--example multi-node``
(``--example notebook``, ``inference-service`` and ``array`` for the other kinds of work; their Ingress is shown
on the configured ingress host, or on an example one when the settings name none; ``--example amd``, ``ascend``,
``cambricon`` and ``hygon`` for a single-node job on another vendor's accelerators)."""

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet.models import Cluster
from scheduling.executors.kubernetes import ingress_config, manifests, spec_for, tenant_device_limits
from scheduling.models import Job


class Command(BaseCommand):
    help = "Print, as YAML, the tenant and job objects that dispatch would apply for a job (nothing is applied)."

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--job", type=int, help="A job's id (it needs a placement: admitted, running or ended).")
        group.add_argument("--example", choices=manifests.ALL_EXAMPLES, help="A made-up job of this shape.")

    def handle(self, *args, job=None, example=None, **options):
        token = "<job token: issued at dispatch>"  # noqa: S105 - a placeholder, printed
        if example:
            spec = manifests.example_spec(example)
            limits = {manifests.device_resource(manifests.DEFAULT_VENDOR): 16}
            if spec.vendor != manifests.DEFAULT_VENDOR:  # the example tenant holds both vendors' devices
                limits[manifests.device_resource(spec.vendor, spec.gpu_model)] = 16
            objects = [*manifests.for_tenant("gp-", spec.tenant, limits), manifests.priority_class(spec.task_type, 80),
                       *manifests.for_job("gp-", spec, settings.PORTAL_URL, token,
                                          ingress=ingress_config() or manifests.EXAMPLE_INGRESS)]
        else:
            found = Job.objects.select_related("tenant", "project", "task_type", "cluster").filter(pk=job).first()
            if found is None:
                raise CommandError(f"--job: no job #{job}.")
            nodes = tuple(sorted(set(found.allocations.values_list("gpu__node__name", flat=True))))
            if not nodes:
                raise CommandError(f"--job: job #{job} has no placement yet (it is {found.status}); its manifests "
                                   "exist once the scheduler admits it. Try --example multi-node.")
            cluster = found.cluster or Cluster.objects.filter(executor="kubernetes").first() or Cluster(name="example")
            prefix = cluster.namespace_prefix
            limits = tenant_device_limits(found.tenant, cluster.accelerator_resources or None)
            objects = [*manifests.for_tenant(prefix, found.tenant.name, limits, cluster.tenant_storage_gib,
                                             cluster.storage_class),
                       manifests.priority_class(found.task_type.code, found.task_type.priority, found.task_type.name),
                       *manifests.for_job(prefix, spec_for(found, nodes), settings.PORTAL_URL, token,
                                          share_resources=cluster.gpu_share_resources or None,
                                          data_claim=bool(cluster.tenant_storage_gib), ingress=ingress_config(),
                                          accelerator_resources=cluster.accelerator_resources or None)]
        self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False))
