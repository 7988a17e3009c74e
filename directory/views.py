"""The login and logout pages (one form for local and LDAP accounts, a button for OpenID Connect), the
OpenID Connect redirect and callback, and the group mapping page for platform admins."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.core.exceptions import ValidationError
from django.forms.forms import NON_FIELD_ERRORS
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from directory import groups
from directory.forms import DIRECTORY_UNAVAILABLE, LINK_REFUSED, LINK_REFUSED_MESSAGE, GroupMappingForm, SignInForm
from directory.models import GroupMapping
from directory.oidc.auth import ProviderUnavailable, oidc_conf, oidc_setting, provider_logout_url
from tenants import access


class SignInView(LoginView):
    """Django's login page with the directory's form (which tells a directory that is down from a wrong
    password) and, when OpenID Connect is configured, the provider's name for the "Sign in with" button."""

    form_class = SignInForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        conf = oidc_conf()
        context["directory_unavailable"] = context["form"].has_error(NON_FIELD_ERRORS, DIRECTORY_UNAVAILABLE)
        context["directory_link_refused"] = context["form"].has_error(NON_FIELD_ERRORS, LINK_REFUSED)
        context["oidc_provider"] = conf["PROVIDER_NAME"] if conf else ""
        return context


class SignOutView(LogoutView):
    """Django's sign-out; someone who came through the OpenID Connect provider is then sent to it to sign out
    there as well (else the next "Sign in with …" would let them straight back in).

    They get there from a page that moves on by itself, not by a redirect: the logout button is a form, and
    the portal's Content-Security-Policy (``form-action 'self'``) forbids a form's redirect to another site."""

    def post(self, request, *args, **kwargs):
        at_provider = provider_logout_url(request)
        response = super().post(request, *args, **kwargs)
        if not at_provider:
            return response
        page = render(request, "directory/provider_logout.html", {
            "provider_url": at_provider, "provider": oidc_conf()["PROVIDER_NAME"]})
        add_never_cache_headers(page)  # it carries the ID token as the logout hint
        return page


def _provider_failed(request):
    conf = oidc_conf() or {}
    messages.error(request, _("Signing in with %(provider)s did not succeed. Try again; if it keeps failing, tell "
                              "the platform administrators.") % {"provider": conf.get("PROVIDER_NAME", "")})
    return redirect("login")


class OIDCSignInView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider (state, nonce and the PKCE challenge kept in the session)."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args, **kwargs):
        # The base class reads the provider's endpoints here; they come from discovery, read in get() where a
        # provider that cannot be reached can be answered with a message instead of an error page.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request):
        if oidc_conf() is None:
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = self.get_settings("OIDC_OP_AUTHORIZATION_ENDPOINT")
            self.OIDC_RP_CLIENT_ID = self.get_settings("OIDC_RP_CLIENT_ID")
        except ProviderUnavailable:
            return _provider_failed(request)
        return super().get(request)


class OIDCCallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back; the backend exchanges the code (with the PKCE verifier)."""

    get_settings = staticmethod(oidc_setting)

    def get(self, request):
        if oidc_conf() is None:
            raise Http404
        return super().get(request)

    def login_failure(self):
        refused_for = getattr(self.request, "directory_link_refused", None)
        if refused_for is not None:  # the provider signed them in; the account of their name is not theirs
            messages.error(self.request, LINK_REFUSED_MESSAGE % {"username": refused_for})
            return redirect("login")
        return _provider_failed(self.request)


def _groups_page(request, form, status=200):
    return render(request, "directory/groups.html", {
        "form": form, "mappings": GroupMapping.objects.select_related("tenant")}, status=status)


@login_required
@access.platform_admin_required
def group_mappings(request):
    """Platform admins: the directory groups and what each gives; add a mapping (kept and explained when
    refused, with a 400)."""
    if request.method != "POST":
        return _groups_page(request, GroupMappingForm())
    form = GroupMappingForm(request.POST)
    if form.is_valid():
        try:
            mapping = groups.add_mapping(**form.cleaned_data)
        except ValidationError as error:
            for field, field_errors in error.message_dict.items():
                form.add_error(field if field in form.fields else None, field_errors)
        else:
            messages.success(request, _("Mapped %(mapping)s. People get it at their next sign-in or the next sync.")
                             % {"mapping": mapping})
            return redirect("directory:groups")
    return _groups_page(request, form, status=400)


@login_required
@require_POST
@access.platform_admin_required
def remove_group_mapping(request, pk):
    mapping = get_object_or_404(GroupMapping.objects.select_related("tenant"), pk=pk)
    groups.remove_mapping(mapping)
    messages.success(request, _("Removed %(mapping)s. People lose what it gave them at their next sign-in or the "
                                "next sync.") % {"mapping": mapping})
    return redirect("directory:groups")
