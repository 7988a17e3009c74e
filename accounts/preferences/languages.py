"""Each person's language: chosen in the header, kept in their preference, carried in their session.

Before anyone chooses, Django's ``LocaleMiddleware`` follows the language cookie, then the browser's
``Accept-Language``. A choice made while signed in is saved with the person and copied into their session at
every sign-in, so it follows them to any browser; ``LanguageMiddleware`` (after authentication) activates it
without a query. A choice made on the sign-in page is kept in the cookie until they sign in.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.core.exceptions import ValidationError
from django.dispatch import receiver
from django.utils import translation
from django.utils.translation import gettext as _

from accounts.models import Preference

SESSION_KEY = "gpuportal_language"


def language_codes() -> tuple[str, ...]:
    return tuple(code for code, _name in settings.LANGUAGES)


def set_language(request, code: str) -> str:
    """Use ``code`` from this request on, and keep it with the signed-in person."""
    code = (code or "").strip().lower()
    if code not in language_codes():
        raise ValidationError({"language": _("Unknown language %(code)r; choose one of %(known)s.") % {
            "code": code[:16], "known": ", ".join(language_codes())}})
    if request.user.is_authenticated:
        Preference.objects.update_or_create(user=request.user, defaults={"language": code})
    if hasattr(request, "session"):
        request.session[SESSION_KEY] = code
    _activate(request, code)
    return code


def _activate(request, code: str) -> None:
    translation.activate(code)
    request.LANGUAGE_CODE = translation.get_language()


@receiver(user_logged_in, dispatch_uid="accounts.language_on_sign_in")
def _remember_on_sign_in(sender, request, user, **kwargs):
    if request is not None and hasattr(request, "session"):
        code = Preference.objects.filter(user=user).values_list("language", flat=True).first() or ""
        if code in language_codes():
            request.session[SESSION_KEY] = code
        else:
            request.session.pop(SESSION_KEY, None)


class LanguageMiddleware:
    """After ``LocaleMiddleware`` and the session: the person's own choice, when they made one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", None)
        code = session.get(SESSION_KEY, "") if session is not None else ""
        if code in language_codes():
            _activate(request, code)
        return self.get_response(request)
