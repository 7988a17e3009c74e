"""Nodes as every signed-in user may see them, and what an agent sends when it registers."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.validators import RegexValidator
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet import occupancy
from fleet.agents.networks import address_problem, agent_networks, resolve
from fleet.models import AdminState, OutsideWork
from fleet.services import MAX_ADMIN_REASON
from gpuportal.web.api import RequestSerializer, text_field


@dataclass(frozen=True)
class NodeHolds:
    """Which GPUs (node id -> indices) the portal's jobs and outside work hold, read once for a whole answer."""

    held: dict[int, set[int]]
    outside: dict[int, set[int]]

    @classmethod
    def of(cls, node_ids) -> NodeHolds:
        """Two queries whatever the number of nodes: the portal's holdings (``fleet.occupancy``), and the work
        outside the portal on these nodes."""
        node_ids = set(node_ids)
        outside: dict[int, set[int]] = {}
        for node_id, indices in OutsideWork.objects.filter(node_id__in=node_ids).values_list("node_id",
                                                                                             "gpu_indices"):
            outside.setdefault(node_id, set()).update(indices)
        held = {node_id: indices for node_id, indices in occupancy.held_gpus().items() if node_id in node_ids}
        return cls(held, outside)


@dataclass(frozen=True)
class _Known:
    """The holdings an answer read, and the nodes they cover."""

    holds: NodeHolds
    nodes: frozenset[int]


#: Where an answer keeps its holdings while its nodes and GPUs are written.
HOLDS = "node_holds"


def _holds(serializer, node_id: int) -> NodeHolds:
    """The answer's holdings (a list reads them once for all its nodes), or this node's alone."""
    known = serializer.context.get(HOLDS)
    if known is None or node_id not in known.nodes:
        known = _Known(NodeHolds.of([node_id]), frozenset([node_id]))
        serializer.context[HOLDS] = known
    return known.holds


class GPUSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    uuid = serializers.CharField()
    model = serializers.CharField()
    memory_mb = serializers.IntegerField()
    health = serializers.CharField()
    ecc_dbe = serializers.IntegerField()
    last_xid = serializers.IntegerField(allow_null=True)
    held = serializers.SerializerMethodField(help_text="A job of the portal holds it.")
    held_outside = serializers.SerializerMethodField(
        help_text="Work the portal did not submit holds it (a job submitted to the cluster's scheduler directly).")

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_held(self, gpu) -> bool:
        return gpu.index in _holds(self, gpu.node_id).held.get(gpu.node_id, ())

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_held_outside(self, gpu) -> bool:
        return gpu.index in _holds(self, gpu.node_id).outside.get(gpu.node_id, ())


class NodeListSerializer(serializers.ListSerializer):
    """A list of nodes reads who holds their GPUs once for the whole answer (no query per node or GPU)."""

    def to_representation(self, data):
        nodes = list(data.all() if hasattr(data, "all") else data)
        ids = frozenset(node.pk for node in nodes)
        self.context[HOLDS] = _Known(NodeHolds.of(ids), ids)
        return super().to_representation(nodes)


class NodeSerializer(serializers.Serializer):
    """A node as every signed-in user may see it (no tenant data, no agent secrets)."""

    name = serializers.CharField()
    cluster = serializers.CharField(source="cluster.name")
    gpu_model = serializers.CharField()
    datacenter = serializers.CharField()
    rack = serializers.CharField()
    network_domain = serializers.CharField()
    health = serializers.CharField()
    admin_state = serializers.CharField()
    schedulable = serializers.BooleanField()
    driver_version = serializers.CharField()
    cuda_version = serializers.CharField()
    agent_version = serializers.CharField()
    last_seen = serializers.DateTimeField(allow_null=True)
    external_state = serializers.CharField(help_text="The node's state as its cluster's own scheduler says it "
                                                     "(Slurm: e.g. drained, down+not_responding); empty elsewhere.")
    external_reason = serializers.CharField(help_text="Why, in the cluster's scheduler's words (Slurm's reason).")
    gpus_free = serializers.SerializerMethodField(
        help_text="Healthy GPUs that neither a job of the portal nor work outside it holds.")
    gpus = GPUSerializer(many=True)

    class Meta:
        list_serializer_class = NodeListSerializer

    @extend_schema_field(OpenApiTypes.INT)
    def get_gpus_free(self, node) -> int:
        holds = _holds(self, node.pk)
        taken = holds.held.get(node.pk, set()) | holds.outside.get(node.pk, set())
        return sum(1 for gpu in node.gpus.all() if gpu.healthy and gpu.index not in taken)


class NodeAdminStateSerializer(RequestSerializer):
    """Cordon, drain or reactivate a node (platform admins), for a reason; ``dry_run`` only says what it would
    touch, as the page's confirmation step does."""

    state = serializers.ChoiceField(choices=AdminState.choices)
    reason = text_field(MAX_ADMIN_REASON, label=gettext_lazy("Reason"),
                        help_text="Why: recorded on the node, in the audit log and on every running job's timeline.")
    dry_run = serializers.BooleanField(default=False, help_text="Only show the running work it would touch.")


class AffectedJobSerializer(serializers.Serializer):
    job = serializers.IntegerField(source="work.job_id")
    name = serializers.CharField(source="work.name")
    tenant = serializers.CharField(source="work.tenant")
    owner = serializers.CharField(source="work.owner")
    gpus = serializers.IntegerField(source="work.gpus", help_text="GPUs of this node the job holds.")
    fate = serializers.CharField(help_text="What becomes of the job, in a few words.")


class NodeActionSerializer(serializers.Serializer):
    """What a node action touches: the running jobs, their GPUs and tenants, and what becomes of each."""

    node = serializers.CharField(source="node.name")
    state = serializers.CharField()
    applied = serializers.BooleanField(help_text="False for a dry run: nothing was changed.")
    effect = serializers.CharField(help_text="What the action means for the node and the jobs on it.")
    jobs = AffectedJobSerializer(many=True)
    gpus = serializers.IntegerField(help_text="GPUs of the node that running jobs hold.")
    tenants = serializers.ListField(child=serializers.CharField())


def _shape_problem(parts) -> str:
    """What is wrong with the URL's form itself ("" when nothing)."""
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return _("The agent URL must be http(s)://host[:port] without user or password.")
    return ""


def agent_url_problem(url: str) -> str:
    """Why the portal must not poll ``url`` ("" when it may).

    The portal sends the node's token to this URL every poll, so an agent may only name an address inside
    the configured agent networks: never link-local (cloud metadata), never loopback unless a configured
    network is itself loopback, and, for a host name, every address it resolves to. Nothing is contacted."""
    parts = urlsplit(url)
    if problem := _shape_problem(parts):
        return problem
    addresses = resolve(parts.hostname)
    if not addresses:
        return _("The host %(host)s of the agent URL does not resolve.") % {"host": parts.hostname}
    networks = agent_networks()
    return next((problem for address in addresses if (problem := address_problem(address, networks))), "")


#: The shape of an agent URL, for the schema: http(s), a host (no user or password), an optional path.
AGENT_URL_PATTERN = RegexValidator(r"^https?://[^\s/?#@]+(/\S*)?$", message=gettext_lazy(
    "The agent URL must be http(s)://host[:port] without user or password."))


class AgentRegistrationSerializer(RequestSerializer):
    """The agent's announcement. The URL's shape is checked here; whether its address may be polled
    (``agent_url_problem``) is checked by the view after the token, so anonymous callers cause no DNS
    lookups. A plain field, not ``URLField``: node host names often have no dot."""

    node = text_field(128, help_text="The node's name, as the portal knows it.")
    url = text_field(255, validators=[AGENT_URL_PATTERN], help_text="Where the agent answers, e.g. "
                                                                    "http://10.0.3.17:9400.")
    labels = serializers.DictField(child=text_field(64, blank=True), required=False, help_text=(
        "datacenter, rack, network (or network_domain): set while the node's are empty; other keys are ignored."))

    def validate_url(self, value: str) -> str:
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError as exc:
            raise serializers.ValidationError(_("Not a valid URL: %(error)s") % {"error": exc}) from exc
        if problem := _shape_problem(parts):
            raise serializers.ValidationError(problem)
        return value
