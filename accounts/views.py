"""The token page (``/account/tokens/``): list, create (the secret shown once), revoke; and the preferences
page (``/account/preferences/``): the time zone times are shown in.

Every answer carries ``Cache-Control: no-store`` (``never_cache``): the page that shows a new secret must not
stay in a browser or proxy cache, and the list is the user's own."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts import tokens
from accounts.forms import NewTokenForm, PreferenceForm
from accounts.models import ApiToken
from accounts.preferences import languages, timezones


def _page(request, form, new_secret="", new_token=None, status=200):
    return render(request, "accounts/tokens.html", {
        "form": form, "tokens": ApiToken.objects.filter(user=request.user), "new_secret": new_secret,
        "new_token": new_token, "conf": tokens.token_settings()}, status=status)


@never_cache
@login_required
def token_list(request):
    if request.method != "POST":
        return _page(request, NewTokenForm(initial={"days": tokens.token_settings()["DEFAULT_DAYS"]}))
    form = NewTokenForm(request.POST)
    if form.is_valid():
        try:
            token, secret = tokens.issue(request.user, form.cleaned_data["name"], form.cleaned_data["days"])
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            return _page(request, NewTokenForm(initial={"days": tokens.token_settings()["DEFAULT_DAYS"]}),
                         new_secret=secret, new_token=token)
    return _page(request, form, status=400)


@never_cache
@login_required
@require_POST
def token_revoke(request, pk):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if tokens.revoke(token):
        messages.success(request, _("Token %(name)s is revoked.") % {"name": token.name})
    return redirect("accounts:tokens")


@login_required
def preferences(request):
    """The person's display settings: the time zone every page shows times in."""
    saved = request.session.get(timezones.SESSION_KEY, "")
    form = PreferenceForm(request.POST or None, initial={"time_zone": saved}, site_zone=settings.TIME_ZONE)
    if request.method == "POST":
        if form.is_valid():
            timezones.set_time_zone(request, form.cleaned_data["time_zone"])
            messages.success(request, _("Times are now shown in %(zone)s.") % {
                "zone": timezones.current_time_zone_name()})
            return redirect("accounts:preferences")
        return render(request, "accounts/preferences.html", {"form": form}, status=400)
    return render(request, "accounts/preferences.html", {"form": form})


@require_POST
def choose_language(request):
    """The header's language choice (signed in or not): kept with the person, in the session and in the
    language cookie (for the sign-in page), then back to the page it was made on."""
    try:
        code = languages.set_language(request, request.POST.get("language", ""))
    except ValidationError as exc:
        return HttpResponseBadRequest(" ".join(exc.messages))
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = "/"
    response = redirect(target)
    response.set_cookie(settings.LANGUAGE_COOKIE_NAME, code, max_age=365 * 86400, samesite="Lax",
                        secure=settings.SESSION_COOKIE_SECURE, httponly=True)
    return response
