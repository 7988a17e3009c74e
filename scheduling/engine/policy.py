"""Scheduling policy knobs, one set per cluster (docs/scheduling.md, "Policies, per cluster")."""

from __future__ import annotations

from dataclasses import dataclass

DAY = 86400.0


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
