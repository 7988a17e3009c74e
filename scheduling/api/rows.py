"""The API job list's rows, each kept in the cache under everything it shows.

Why: the page cache keeps a whole answer per caller only until the next change anywhere, and on a busy cluster
(jobs submitted, admitted, started and ended every second) it misses nearly always. Then building fifty jobs
and their related rows as model instances and serialising them was two thirds of the request, although a job
that did not move gives the same row as a second before. So the page is read as plain values (``FIELDS``: every
column of the job and the names and reason its row shows), with what its row shows beside them (the GPUs it
holds, its dependencies and their state), and each row is looked up under a key made of all of it and of the
reader (language and time zone: the reason's sentence and the times; the address the links are made from). Only
the jobs whose rows are missing are read as instances and serialised (``JobSerializer``, the one declaration of a
row), and kept for the next reader. A job that moves gets a new key, so a kept row is never stale; the job tables
of the pages keep their rows the same way (``scheduling.templatetags.job_tables``). A waiting job's place and
estimates are filled in at each read from the queue table (``PLACE_SHOWN``): every pass that starts one job moves
every job behind it, which would otherwise draw every waiting row again after each pass.

A service replica's row is never kept: its ready replicas are probed when it is shown.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable

from django.core.cache import cache
from django.utils.timezone import get_current_timezone_name
from django.utils.translation import get_language

from gpuportal.web.serializers import planned
from scheduling.api.serializers import JobSerializer
from scheduling.jobs.dependencies import DependsOn, depends_on_of
from scheduling.jobs.queries import shown_values
from scheduling.models import WAITING_STATUSES, Job, JobAllocation, WorkloadKind, queue_places

#: The job's own columns (but the row's bookkeeping, which it does not show and ``for_listing`` does not read),
#: then what its row shows of the rows it names (a renamed tenant or cluster, a new reason, changes the key as a
#: job's own change does).
FIELDS = ("id", *(field.attname for field in Job._meta.concrete_fields
                  if field.attname not in ("id", "created", "last_updated")),
          "tenant__name", "project__name", "owner__username", "task_type__code", "cluster__name",
          "queue_state__wait_reason", "queue_state__wait_reason_params")
_STATUS, _KIND = FIELDS.index("status"), FIELDS.index("kind")
#: What a waiting job's row shows of its place in the queue table (``QueuePlace``), by the field that shows it.
PLACE_SHOWN = {"queue_position": "position", "tenant_queue_position": "tenant_position",
               "estimated_start": "estimated_start", "earliest_start": "earliest_start", "latest_start": "latest_start"}
#: How long a drawn row is kept; a row whose job changes is never read again (its key changes with it).
ROW_SECONDS = 600

#: The rows of the jobs given by id, drawn afresh as the serializer gives them, each with the key of what it
#: showed; ``depends`` is what ``depends_on_of`` said of them.
Draw = Callable[[list[int], dict[int, list[DependsOn]]], dict[int, tuple[str, dict]]]


def page_rows(shown: list[tuple], request, draw: Draw) -> list[dict]:
    """The serialised rows of the jobs whose ``FIELDS`` values are ``shown`` (a page, in its order), each read
    back from the cache when everything it shows is unchanged, else drawn by ``draw`` and kept."""
    ids = [values[0] for values in shown]
    held, depends, places = placements(ids), depends_on_of(ids), queue_places()
    reader = reader_of(request)
    keys = {values[0]: key(values, held.get(values[0], ()), depends[values[0]], reader)
            for values in shown if values[_KIND] != WorkloadKind.SERVICE}
    kept = cache.get_many(list(keys.values())) if keys else {}
    missing = [pk for pk in ids if keys.get(pk) not in kept]
    drawn = draw(missing, depends) if missing else {}
    keep = {row_key: row for pk, (row_key, row) in drawn.items() if pk in keys}  # a replica's row is not kept
    if keep:
        cache.set_many(keep, ROW_SECONDS)
    rows = []
    for pk in ids:
        if pk in drawn:
            rows.append(drawn[pk][1])
        elif keys.get(pk) in kept:
            rows.append(kept[keys[pk]])
        # else: deleted between the two reads, no row
    fields = planned(JobSerializer).fields
    for row in rows:
        if row["status"] in WAITING_STATUSES:
            place = places.get(row["id"])
            for name, attribute in PLACE_SHOWN.items():
                value = getattr(place, attribute) if place is not None else None
                row[name] = None if value is None else fields[name].to_representation(value)
    return rows


def placements(ids: list[int]) -> dict[int, tuple[tuple[str, int], ...]]:
    """The GPUs each job holds now as (node name, index), in the order its row lists them."""
    found: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for job_id, node, index in JobAllocation.objects.filter(job_id__in=ids, released_at__isnull=True).order_by(
            "gpu__node__name", "gpu__index").values_list("job_id", "gpu__node__name", "gpu__index"):
        found[job_id].append((node, index))
    return {job_id: tuple(gpus) for job_id, gpus in found.items()}


def shown_by(job: Job) -> tuple:
    """``FIELDS`` of a job read as an instance (``JobSerializer``'s queryset), as ``values_list`` reads them."""
    return shown_values(job, FIELDS)


def held_by(job: Job) -> tuple[tuple[str, int], ...]:
    return tuple((gpu.node.name, gpu.index) for gpu in job.held_gpus())


def reader_of(request) -> str:
    """What of the reader a row shows: the language of its sentences, the time zone of its times and the
    address its links are made from."""
    return f"{get_language()}|{get_current_timezone_name()}|{request.build_absolute_uri('/')}"


def key(values: tuple, held: tuple, depends: list[DependsOn], reader: str) -> str:
    return "api-job-row:" + hashlib.sha256(repr((values, held, depends, reader)).encode()).hexdigest()[:40]
