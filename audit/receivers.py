"""Audit every change of quotas, memberships, platform roles, clusters and reservations, wherever it is
made (a service, an approval, the Django admin), from the model signals: one record per saved change."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.forms.models import model_to_dict

from scheduling.models import Cluster, Reservation
from tenants.models import Membership, PlatformRole, Quota

from . import log
from .models import AuditAction as A

#: model -> (action on create, action on change, action on delete, fields kept in before/after)
AUDITED = {
    Quota: (A.QUOTA_CHANGE, A.QUOTA_CHANGE, A.QUOTA_CHANGE, ["tenant", "gpu_model", "guaranteed_gpus", "limit_gpus"]),
    Membership: (A.MEMBERSHIP_ADD, A.MEMBERSHIP_CHANGE, A.MEMBERSHIP_REMOVE, ["user", "tenant", "role"]),
    PlatformRole: (A.PLATFORM_ROLE_ADD, A.PLATFORM_ROLE_ADD, A.PLATFORM_ROLE_REMOVE, ["user", "role"]),
    Cluster: (A.CLUSTER_CHANGE, A.CLUSTER_CHANGE, A.CLUSTER_CHANGE,
              ["name", "executor", "ordering", "placement", "backfill", "preemption", "fair_share_half_life_hours"]),
    Reservation: (A.RESERVATION_CREATE, A.RESERVATION_CHANGE, A.RESERVATION_DELETE,
                  ["tenant", "gpu_model", "gpus", "start", "end"]),
}
_BEFORE = "_audit_before"


def _state(instance, fields):
    return model_to_dict(instance, fields=fields)


@receiver(pre_save)
def _remember_before(sender, instance, **kwargs):
    if sender not in AUDITED or instance.pk is None:
        return
    old = sender.objects.filter(pk=instance.pk).first()
    setattr(instance, _BEFORE, _state(old, AUDITED[sender][3]) if old is not None else None)


@receiver(post_save)
def _audit_save(sender, instance, created, raw=False, **kwargs):
    if sender not in AUDITED or raw:
        return
    add, change, _delete, fields = AUDITED[sender]
    before = None if created else getattr(instance, _BEFORE, None)
    after = _state(instance, fields)
    if before == after:
        return  # saved without a change (e.g. get_or_create of an existing row)
    log.record(add if created else change, instance, before=before, after=after)


@receiver(post_delete)
def _audit_delete(sender, instance, **kwargs):
    if sender not in AUDITED:
        return
    log.record(AUDITED[sender][2], instance, before=_state(instance, AUDITED[sender][3]), after=None)
