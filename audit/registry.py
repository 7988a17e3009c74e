"""Audit every change of the models registered here, wherever it is made (a service, an approval, the
Django admin), from the model signals: one record per saved change.

The audit layer knows nothing of the apps above it: each registers what it audits in its
``AppConfig.ready()`` with ``audit_changes`` (fleet: clusters; scheduling: reservations). Tenants sits
below audit, so audit registers the tenants' quotas, memberships and platform roles itself.
"""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.forms.models import model_to_dict

from . import log

#: model -> (action on create, action on change, action on delete, fields kept in before/after)
AUDITED: dict = {}
_BEFORE = "_audit_before"


def audit_changes(model, on_create: str, on_change: str, on_delete: str, fields: list[str]) -> None:
    """Record an audit entry for every create, change and delete of ``model`` (keeping ``fields``)."""
    AUDITED[model] = (on_create, on_change, on_delete, list(fields))


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
