"""In-app notifications and email, as each user chose (no preference row: in the portal except for an opt-in kind
such as a job that succeeded; by email only for the duties and warnings, mail about one's own jobs and requests
once chosen), in each recipient's language; mail is sent by a Celery task (``governance.notifications.mail``)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from accounts.models import Preference
from governance.models import MAIL_OPT_IN_KINDS, OPT_IN_KINDS, Notification, NotificationKind, NotificationPreference
from governance.notifications import mail as mail_delivery
from gpuportal.text import phrases
from tenants.models import Membership, PlatformRole, Role


def preferences(user) -> dict[str, tuple[bool, bool]]:
    """``{kind: (in the portal, by email)}`` for every kind, the defaults where the user chose nothing: mail about
    one's own jobs and requests only once chosen (``MAIL_OPT_IN_KINDS``)."""
    chosen = {p.kind: (p.in_app, p.email) for p in NotificationPreference.objects.filter(user=user)}
    return {kind: chosen.get(kind, (kind not in OPT_IN_KINDS, kind not in OPT_IN_KINDS | MAIL_OPT_IN_KINDS))
            for kind in NotificationKind.values}


Text = str | Callable[[], str]


def _in_language(text: Text, language: str) -> str:
    """``text`` as the recipient reads it: a callable is called, a stored phrase (``gpuportal.text.phrases``, such as
    a job event's reason) is rendered, with their language active; other text is sent as it is."""
    with translation.override(language):
        return str(text()) if callable(text) else phrases.read(text, phrases.data_of(text))


def notify(users, kind: str, title: Text, body: Text = "", url: str = "", *, event: str = "",
           mail: bool | None = None, mail_extra: Text = "") -> int:
    """Send one notification to each of ``users``; returns how many were stored or mailed.

    ``title`` and ``body`` may be callables (``lambda: _("…") % {…}``): each recipient then gets them in their
    own language (their preference, else the site's), whoever caused the notification. Mail goes where the
    recipient chose it for ``kind``, or as ``mail`` says when given (a job's own mail types); it is prepared now,
    in their language, with ``mail_extra`` (read only for mail) and the link, and sent by a Celery task, once per
    ``event`` and recipient (``governance.notifications.mail``; no ``event``: once per notification)."""
    sent = 0
    recipients = {u.pk: u for u in users if u is not None}
    languages = dict(Preference.objects.filter(user_id__in=recipients).exclude(language="")
                     .values_list("user_id", "language"))
    for user in recipients.values():
        language = languages.get(user.pk, settings.LANGUAGE_CODE)
        title_text, body_text = _in_language(title, language), _in_language(body, language)
        in_app, email = preferences(user)[kind]
        email = (email if mail is None else mail) and bool(user.email)
        if not (in_app or email):
            continue
        note = Notification.objects.create(user=user, kind=kind, title=title_text[:200], body=body_text, url=url,
                                           read_at=None if in_app else timezone.now())
        sent += 1
        if email:
            with translation.override(language):
                subject = _("[GPU Portal] %(title)s") % {"title": title_text}
                link = _("Open it in the portal: %(url)s") % {"url": f"{settings.PORTAL_URL}{url}"} if url else ""
            text = "\n\n".join(part for part in (body_text, _in_language(mail_extra, language), link) if part)
            mail_delivery.prepare(event or f"notification:{note.pk}", user, subject, text or title_text, note)
    return sent


def tenant_approvers(tenant_id: int):
    ids = Membership.objects.filter(tenant_id=tenant_id, role=Role.APPROVER).values("user_id")
    return list(get_user_model().objects.filter(pk__in=ids, is_active=True))


def platform_approvers():
    ids = PlatformRole.objects.filter(role=PlatformRole.Kind.PLATFORM_ADMIN).values("user_id")
    return list(get_user_model().objects.filter(Q(pk__in=ids) | Q(is_superuser=True), is_active=True))


def unread_count(user) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()
