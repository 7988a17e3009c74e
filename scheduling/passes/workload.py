"""The site's own recent job shapes, read for the engine's placement (``engine.Snapshot.history``).

Why history and not the queue: fragmentation-aware placement keeps free capacity in the shapes that will ask
for it next, and what a site asks for over days is a steadier guide than the minute's queue (which after a
quiet night may hold three jobs). The shapes of the jobs submitted in the last ``SCHEDULER["HISTORY_DAYS"]``
days, with their counts, per cluster: the jobs placed on it and those not placed anywhere yet. On the trace's
placement experiment this history leaves fewer GPUs unallocated than FGD given the whole trace's distribution
(docs/placement.md). Reads only.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db.models import Count

from scheduling.engine.fragmentation import TaskShape
from scheduling.models import Job

History = tuple[tuple[TaskShape, float], ...]


#: How long a process reuses the shapes it read: days of history move little in minutes, and the query groups
#: every job of those days (an array of 10,000 tasks is 10,000 rows), so a pass every few seconds does not
#: repeat it.
REREAD_SECONDS = 300.0
_kept: dict[tuple, tuple[float, dict[int, History]]] = {}


def recent_shapes(now, cluster_ids) -> dict[int, History]:
    """Per cluster id: (shape, jobs) of the jobs submitted in the last ``HISTORY_DAYS`` days; a job not placed
    on any cluster yet counts for every one. Empty where the site has no history (or ``HISTORY_DAYS`` is 0):
    the engine then packs against its queue and running jobs. Read once for all clusters, and again after
    ``REREAD_SECONDS`` (by ``now``: a replay's clock, not the wall's)."""
    days = settings.SCHEDULER.get("HISTORY_DAYS", 0)
    if not days:
        return {}
    key = (days, tuple(sorted(cluster_ids)))
    at, history = _kept.get(key, (None, None))
    if at is not None and 0 <= now.timestamp() - at < REREAD_SECONDS:
        return history
    history = _read(now, days, key[1])
    _kept.clear()
    _kept[key] = (now.timestamp(), history)
    return history


def forget() -> None:
    """Read the shapes afresh next time (a test that has just submitted the jobs it counts)."""
    _kept.clear()


def _read(now, days: int, cluster_ids) -> dict[int, History]:
    rows = (Job.objects.filter(submitted_at__gte=now - timedelta(days=days))
            .values("cluster_id", "gpus_per_node", "gpu_milli", "cpu_milli", "memory_mib", "gpu_model",
                    "accept_models")
            .annotate(jobs=Count("id")).order_by())
    counts: dict[int | None, Counter] = {}
    for row in rows:
        gpus = row["gpus_per_node"]
        models = tuple(sorted(row["accept_models"] or ())) or (
            () if row["gpu_model"] in ("", "*") else (row["gpu_model"],))
        shape = TaskShape(gpus, row["gpu_milli"] if gpus else 0, row["cpu_milli"], row["memory_mib"],
                          models if gpus else ())
        counts.setdefault(row["cluster_id"], Counter())[shape] += row["jobs"]
    unplaced = counts.pop(None, Counter())
    history = {}
    for cluster_id in cluster_ids:
        shapes = counts.get(cluster_id, Counter()) + unplaced
        if shapes:
            history[cluster_id] = tuple(sorted(shapes.items(), key=lambda item: (-item[1], repr(item[0]))))
    return history
