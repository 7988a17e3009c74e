"""Job templates: built-in and tenant templates, their versions, and a job's request to clone it.

(Placeholder: the template service is being written; ``usable_version`` is what submission relies on.)
"""

from __future__ import annotations

from django.db.models import Q

from .models import JobTemplateVersion


def usable_version(user, number: int, tenant_id: int | None) -> JobTemplateVersion | None:
    """Template version ``number`` (its id) when the submitter's tenant may use it: a platform template's or
    one of the tenant's own; None otherwise (reported like one that does not exist)."""
    scope = Q(template__tenant__isnull=True)
    if tenant_id is not None:
        scope |= Q(template__tenant_id=tenant_id)
    return JobTemplateVersion.objects.filter(scope, pk=number).select_related("template").first()
