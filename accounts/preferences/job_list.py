"""How each person last shaped the job list (its columns and order), remembered so that the list, its live
refresh and its export show the same thing on the next visit and from the API.

Accounts stores the choice as given; which columns and orders exist is scheduling's (``scheduling.jobs.columns``),
which checks them before they are remembered and again when they are read (a column since removed is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction

from accounts.models import Preference


@dataclass(frozen=True)
class JobListChoice:
    columns: tuple[str, ...]  # empty: the default columns
    sort: str  # empty: the default order (newest first)


def job_list_choice(user) -> JobListChoice:
    """The person's remembered choice (one small query; none remembered: the defaults)."""
    kept = Preference.objects.filter(user=user).values_list("job_columns", "job_sort").first()
    if kept is None:
        return JobListChoice((), "")
    columns, sort = kept
    return JobListChoice(tuple(str(c) for c in columns) if isinstance(columns, list) else (), sort or "")


def remember_job_list(user, choice: JobListChoice, known: JobListChoice | None = None) -> None:
    """Keep ``choice`` as the person's; nothing is written when it is what ``known`` (read before) says."""
    if known is not None and known == choice:
        return
    values = {"job_columns": list(choice.columns), "job_sort": choice.sort}
    try:
        with transaction.atomic():
            Preference.objects.update_or_create(user=user, defaults=values)
    except IntegrityError:  # the person's first choice, saved at the same moment by another tab: this one wins
        Preference.objects.filter(user=user).update(**values)
