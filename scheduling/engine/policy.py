"""Scheduling policy knobs, one set per cluster (docs/scheduling.md, "Policies, per cluster")."""

from __future__ import annotations

from dataclasses import dataclass

DAY = 86400.0
AGING_POINTS_PER_HOUR = 5.0
KEEP_NODE_AFTER_HOURS = 6.0


@dataclass(frozen=True)
class Policy:
    name: str = "default"
    #: "fair_share": priority class, then tenant weight and decayed usage, then submit time;
    #: "fifo": arrival order only (the first-fit baseline).
    ordering: str = "fair_share"
    half_life_seconds: float = 7 * DAY
    #: Each GPU a tenant already has queued ahead in the same class counts as this many GPU-hours of usage,
    #: so tenants interleave instead of one tenant's backlog going first.
    queued_gpu_hours: float = 1.0
    #: "pack": tightest topology domain and best-fit nodes (keeps whole nodes free for large jobs);
    #: "first_fit": the first node(s) in name order that fit.
    placement: str = "pack"
    backfill: bool = True
    preemption: bool = True
    enforce_quotas: bool = True
    #: Aging across priority classes: the next job of each class (in its class's fair-share order) counts as
    #: ``priority + aging_points_per_hour x hours it has waited`` when the classes' queues are merged, so a
    #: job of a lower class goes ahead of newer jobs of a higher one once it has waited the classes' gap /
    #: this rate (50 points: Burstable against LS after 10 hours at 5). Inside a class fair share still
    #: decides. Preemption rights keep the plain priority. 0: strict priority classes. Measured with
    #: ``replay_trace`` (docs/scheduling.md, "No class starved").
    aging_points_per_hour: float = AGING_POINTS_PER_HOUR
    #: A single-node job that heads its GPU model's queue (the first that cannot be placed) and has waited this
    #: many hours gets one node kept for it: the node expected to have its GPUs free first; no other job lands
    #: there meanwhile, so the node drains to it. EASY backfill alone counts GPUs, not nodes: an 8-GPU job
    #: waited while the GPUs it was counted on were free but scattered. 0: never.
    keep_node_after_hours: float = KEEP_NODE_AFTER_HOURS
    #: at most this many jobs per pass search for preemption victims (bounds a pass's time)
    max_preemption_searches: int = 50
    #: The likely start range around an estimated wait W: from now + low x W to now + high x W + margin.
    #: Calibrated with ``replay_trace`` on the Alibaba trace: the narrowest range that holds the actual start
    #: of at least 80 % of the jobs that waited (docs/scheduling.md, "Estimated starts as ranges").
    eta_low_ratio: float = 0.25
    eta_high_ratio: float = 2.0
    eta_margin_seconds: float = 900.0

    @classmethod
    def first_fit(cls) -> Policy:
        """The baseline: arrival order, first node that fits, no backfill, no preemption."""
        return cls(name="first-fit", ordering="fifo", placement="first_fit", backfill=False, preemption=False)

    @classmethod
    def named(cls, name: str, **overrides) -> Policy:
        if name in ("first-fit", "first_fit"):
            return cls.first_fit()
        if name == "default":
            return cls(**overrides)
        raise ValueError(f"unknown policy {name!r}; known: default, first-fit")
