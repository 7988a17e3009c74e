"""The one change a what-if run makes to a month: GPUs added or removed per model, quotas or guarantees set,
policy settings changed. Parsed from the command's, the API's and the page's options by one function, so that
all three refuse the same input with the same words, and applied to the month's replay world."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from fleet.catalogue import gpu_model_catalogue
from metering.reports.sizing import DEFAULT_GPUS_PER_NODE, gpus_per_node
from scheduling.engine import NodeSnapshot, QuotaSnapshot
from scheduling.engine.simulation import SimNode, World
from tenants.models import Tenant

#: The most GPUs one change adds or removes per model, and the longest fair-share half-life it sets.
MAX_GPUS = 100_000
MAX_HALF_LIFE_HOURS = 24 * 365
#: ``MODEL=GPUS`` (``--add``) and ``TENANT:MODEL=GPUS`` (``--quota``, ``--guarantee``).
ADD = re.compile(r"^\s*([^=:\s]+)\s*=\s*(-?[0-9]+)\s*$")
QUOTA = re.compile(r"^\s*([^=:\s]+)\s*:\s*([^=:\s]+)\s*=\s*([0-9]+)\s*$")


@dataclass(frozen=True)
class QuotaChange:
    tenant: str
    gpu_model: str
    gpus: int


@dataclass(frozen=True)
class Change:
    """GPUs to add per model (negative: remove; rounded to whole nodes of the catalogue's shape), quota limits
    and guarantees to set, and policy settings (None: as they were)."""

    add: dict[str, int] = field(default_factory=dict)
    quotas: tuple[QuotaChange, ...] = ()
    guarantees: tuple[QuotaChange, ...] = ()
    half_life_hours: float | None = None
    backfill: bool | None = None
    preemption: bool | None = None

    @property
    def empty(self) -> bool:
        return self == Change()

    def as_data(self) -> dict:
        data = asdict(self)
        data["quotas"] = [asdict(q) for q in self.quotas]
        data["guarantees"] = [asdict(q) for q in self.guarantees]
        return data

    @classmethod
    def from_data(cls, data: dict) -> Change:
        return cls(add=dict(data.get("add") or {}), quotas=tuple(QuotaChange(**q) for q in data.get("quotas") or ()),
                   guarantees=tuple(QuotaChange(**q) for q in data.get("guarantees") or ()),
                   half_life_hours=data.get("half_life_hours"), backfill=data.get("backfill"),
                   preemption=data.get("preemption"))


def parse_change(add=(), quota=(), guarantee=(), half_life_hours=None, backfill=None, preemption=None) -> Change:
    """The change the options describe; a ValidationError naming the option and what it accepts otherwise."""
    errors: dict[str, str] = {}
    models = set(gpu_model_catalogue())
    tenants = set(Tenant.objects.values_list("name", flat=True))
    added: dict[str, int] = {}
    for text in _texts(add):
        match = ADD.match(text)
        if not match or abs(int(match.group(2))) > MAX_GPUS:
            errors["add"] = _("Give MODEL=GPUS, e.g. H100=8 (GPUs from -%(max)d to %(max)d), not %(t)r.") % {
                "max": MAX_GPUS, "t": text}
        elif match.group(1) not in models:
            errors["add"] = _("Unknown GPU model %(m)r; known: %(known)s.") % {
                "m": match.group(1), "known": ", ".join(sorted(models)) or "-"}
        else:
            added[match.group(1)] = added.get(match.group(1), 0) + int(match.group(2))
    quotas = _quota_changes("quota", quota, models, tenants, errors)
    guarantees = _quota_changes("guarantee", guarantee, models, tenants, errors)
    hours = None
    if half_life_hours not in (None, ""):
        try:
            hours = float(half_life_hours)
            if not math.isfinite(hours) or not 0 < hours <= MAX_HALF_LIFE_HOURS:
                raise ValueError
        except (TypeError, ValueError):
            errors["half_life_hours"] = _("Give the fair-share half-life in hours, above 0 and at most %(max)d.") % {
                "max": MAX_HALF_LIFE_HOURS}
    if errors:
        raise ValidationError(errors)
    return Change(add=added, quotas=quotas, guarantees=guarantees, half_life_hours=hours,
                  backfill=_flag(backfill), preemption=_flag(preemption))


def _texts(values) -> list[str]:
    if isinstance(values, str):
        values = [values]
    return [str(v) for v in values or () if str(v).strip()]


def _flag(value) -> bool | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _quota_changes(name: str, values, models, tenants, errors) -> tuple[QuotaChange, ...]:
    found = []
    for text in _texts(values):
        match = QUOTA.match(text)
        if not match or int(match.group(3)) > MAX_GPUS:
            errors[name] = _("Give TENANT:MODEL=GPUS, e.g. vision:H100=16 (GPUs from 0 to %(max)d), not %(t)r.") % {
                "max": MAX_GPUS, "t": text}
        elif match.group(1) not in tenants:
            errors[name] = _("Unknown tenant %(t)r.") % {"t": match.group(1)}
        elif match.group(2) not in models:
            errors[name] = _("Unknown GPU model %(m)r; known: %(known)s.") % {
                "m": match.group(2), "known": ", ".join(sorted(models)) or "-"}
        else:
            found.append(QuotaChange(match.group(1), match.group(2), int(match.group(3))))
    return tuple(found)


def whole_node_count(model: str, gpus: int, shapes: dict[str, int]) -> int:
    """Nodes of ``model`` that ``gpus`` GPUs round up to (away from zero: -3 removes a whole node)."""
    per_node = shapes.get(model, DEFAULT_GPUS_PER_NODE)
    return int(math.copysign(math.ceil(abs(gpus) / per_node), gpus)) if gpus else 0


def apply(change: Change, world: World, shapes: dict[str, int] | None = None) -> World:
    """``world`` with ``change`` made for the whole stretch (``shapes``: GPUs per node by model, the catalogue's):
    nodes added (copies of the model's first node, or a plain node of the catalogue's size) or removed (the last
    ones by name), quotas and guarantees set, policy settings changed."""
    shapes = gpus_per_node() if shapes is None else shapes
    nodes = list(world.nodes)
    next_id = max((n.node.id for n in nodes), default=0) + 1
    for model, gpus in sorted(change.add.items()):
        count = whole_node_count(model, gpus, shapes)
        same = [n for n in nodes if n.node.gpu_model == model]
        if count < 0:
            gone = {id(n) for n in sorted(same, key=lambda n: n.node.name)[count:]}
            nodes = [n for n in nodes if id(n) not in gone]
            continue
        per_node = shapes.get(model, DEFAULT_GPUS_PER_NODE)
        template = same[0].node if same else NodeSnapshot(0, "", model, ())
        for k in range(count):
            nodes.append(SimNode(replace(template, id=next_id, name=f"what-if-{model.lower()}-{k + 1:02d}",
                                         gpu_indices=tuple(range(per_node)), gpu_total=per_node, schedulable=True)))
            next_id += 1
    quotas = {(q.tenant, q.gpu_model): q for q in world.quotas}
    for q in change.quotas:
        old = quotas.get((q.tenant, q.gpu_model), QuotaSnapshot(q.tenant, q.gpu_model, 0, 0))
        quotas[(q.tenant, q.gpu_model)] = replace(old, limit=q.gpus, guaranteed=min(old.guaranteed, q.gpus))
    for q in change.guarantees:
        old = quotas.get((q.tenant, q.gpu_model), QuotaSnapshot(q.tenant, q.gpu_model, 0, 0))
        quotas[(q.tenant, q.gpu_model)] = replace(old, guaranteed=q.gpus, limit=max(old.limit, q.gpus))
    policy = world.policy
    if change.half_life_hours is not None:
        policy = replace(policy, half_life_seconds=change.half_life_hours * 3600)
    if change.backfill is not None:
        policy = replace(policy, backfill=change.backfill)
    if change.preemption is not None:
        policy = replace(policy, preemption=change.preemption)
    present = {n.node.id for n in nodes}
    carried = tuple(c for c in world.carried if all(p.node_id in present for p in c.job.placements))
    return replace(world, nodes=tuple(nodes), quotas=tuple(quotas.values()), policy=policy, carried=carried)
