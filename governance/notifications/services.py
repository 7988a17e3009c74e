"""In-app notifications and email, as each user chose (no preference row: both, or neither for an opt-in
kind such as a job that succeeded), in each recipient's language."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from accounts.models import Preference
from governance.models import OPT_IN_KINDS, Notification, NotificationKind, NotificationPreference
from gpuportal.text import phrases
from tenants.models import Membership, PlatformRole, Role

logger = logging.getLogger(__name__)


def preferences(user) -> dict[str, tuple[bool, bool]]:
    """``{kind: (in the portal, by email)}`` for every kind, the defaults where the user chose nothing."""
    chosen = {p.kind: (p.in_app, p.email) for p in NotificationPreference.objects.filter(user=user)}
    return {kind: chosen.get(kind, (False, False) if kind in OPT_IN_KINDS else (True, True))
            for kind in NotificationKind.values}


Text = str | Callable[[], str]


def _in_language(text: Text, language: str) -> str:
    """``text`` as the recipient reads it: a callable is called, a stored phrase (``gpuportal.text.phrases``, such as
    a job event's reason) is rendered, with their language active; other text is sent as it is."""
    with translation.override(language):
        return str(text()) if callable(text) else phrases.read(text, phrases.data_of(text))


def notify(users, kind: str, title: Text, body: Text = "", url: str = "") -> int:
    """Send one notification to each of ``users``; returns how many were stored or mailed.

    ``title`` and ``body`` may be callables (``lambda: _("…") % {…}``): each recipient then gets them in their
    own language (their preference, else the site's), whoever caused the notification."""
    sent = 0
    recipients = {u.pk: u for u in users if u is not None}
    languages = dict(Preference.objects.filter(user_id__in=recipients).exclude(language="")
                     .values_list("user_id", "language"))
    for user in recipients.values():
        language = languages.get(user.pk, settings.LANGUAGE_CODE)
        title_text, body_text = _in_language(title, language), _in_language(body, language)
        in_app, email = preferences(user)[kind]
        emailed = False
        if email and user.email:
            try:
                with translation.override(language):
                    subject = _("[GPU Portal] %(title)s") % {"title": title_text}
                send_mail(subject, f"{body_text}\n\n{settings.PORTAL_URL}{url}".strip(),
                          settings.DEFAULT_FROM_EMAIL, [user.email])
                emailed = True
            except Exception:  # a mail server that is down must not stop a scheduling pass
                logger.exception("mail to %s failed", user.email)
        if in_app or emailed:
            Notification.objects.create(user=user, kind=kind, title=title_text[:200], body=body_text, url=url,
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
