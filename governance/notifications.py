"""In-app notifications and email, as each user chose (no preference row: both, or neither for an opt-in
kind such as a job that succeeded)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone

from tenants.models import Membership, PlatformRole, Role

from .models import OPT_IN_KINDS, Notification, NotificationKind, NotificationPreference

logger = logging.getLogger(__name__)


def preferences(user) -> dict[str, tuple[bool, bool]]:
    """``{kind: (in the portal, by email)}`` for every kind, the defaults where the user chose nothing."""
    chosen = {p.kind: (p.in_app, p.email) for p in NotificationPreference.objects.filter(user=user)}
    return {kind: chosen.get(kind, (False, False) if kind in OPT_IN_KINDS else (True, True))
            for kind in NotificationKind.values}


def notify(users, kind: str, title: str, body: str = "", url: str = "") -> int:
    """Send one notification to each of ``users``; returns how many were stored or mailed."""
    sent = 0
    for user in {u.pk: u for u in users if u is not None}.values():
        in_app, email = preferences(user)[kind]
        emailed = False
        if email and user.email:
            try:
                send_mail(f"[GPU Portal] {title}", f"{body}\n\n{settings.PORTAL_URL}{url}".strip(),
                          settings.DEFAULT_FROM_EMAIL, [user.email])
                emailed = True
            except Exception:  # a mail server that is down must not stop a scheduling pass
                logger.exception("mail to %s failed", user.email)
        if in_app or emailed:
            Notification.objects.create(user=user, kind=kind, title=title[:200], body=body, url=url,
                                        emailed=emailed, read_at=None if in_app else timezone.now())
            sent += 1
    return sent


def tenant_approvers(tenant_id: int):
    ids = Membership.objects.filter(tenant_id=tenant_id, role=Role.APPROVER).values("user_id")
    return list(get_user_model().objects.filter(pk__in=ids, is_active=True))


def platform_approvers():
    ids = PlatformRole.objects.filter(role=PlatformRole.Kind.PLATFORM_ADMIN).values("user_id")
    return list(get_user_model().objects.filter(Q(pk__in=ids) | Q(is_superuser=True), is_active=True))


def unread_count(user) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()
