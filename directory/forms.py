from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from directory.models import GROUP_MAX_LENGTH
from tenants.models import PlatformRole, Role, Tenant

DIRECTORY_UNAVAILABLE = "directory_unavailable"
LINK_REFUSED = "directory_link_refused"
#: Shown when the directory accepted the password but the account of that name is not the person's.
LINK_REFUSED_MESSAGE = _(
    "The directory accepted your password, but the portal's account %(username)s is not linked to your directory "
    "account, so you were not signed in to it. If it is yours, ask the platform administrators to link the two.")


class SignInForm(AuthenticationForm):
    """The one login form, for local accounts and LDAP alike.

    A refused sign-in says only that the username and password did not match, whether the person exists or
    not; when the directory could not be reached it says that instead (true for every username, so it tells
    nothing about any of them either). When the directory accepted the password but the account of that name is
    not linked to the person (a local account, a superuser's), it says so: only someone holding that directory
    password learns it."""

    error_messages = {
        **AuthenticationForm.error_messages,
        DIRECTORY_UNAVAILABLE: _("The directory could not be reached, so your password could not be checked. "
                                 "Try again in a few minutes; if it keeps failing, tell the platform administrators."),
        LINK_REFUSED: LINK_REFUSED_MESSAGE,
    }

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            refused_for = getattr(self.request, "directory_link_refused", None)
            if refused_for is not None:
                raise ValidationError(self.error_messages[LINK_REFUSED], code=LINK_REFUSED,
                                      params={"username": refused_for}) from None
            if getattr(self.request, "directory_unavailable", False):
                raise ValidationError(self.error_messages[DIRECTORY_UNAVAILABLE], code=DIRECTORY_UNAVAILABLE) from None
            raise


class GroupMappingForm(forms.Form):
    """A new mapping: a group, and either a tenant with a role or a platform role. The combination is checked
    by ``directory.groups.add_mapping``, whose errors the page shows next to each field."""

    group = forms.CharField(label=_("Directory group"), max_length=GROUP_MAX_LENGTH, help_text=_(
        "An LDAP group's DN (cn=vision-researchers,ou=groups,dc=example,dc=org) or a value of the OpenID Connect "
        "groups claim."))
    tenant = forms.ChoiceField(label=_("Tenant"), required=False)
    role = forms.ChoiceField(label=_("Role in the tenant"), required=False,
                             choices=[("", "—"), *Role.choices])
    platform_role = forms.ChoiceField(label=_("or platform role"), required=False,
                                      choices=[("", "—"), *PlatformRole.Kind.choices])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].choices = [("", "—"), *Tenant.objects.values_list("name", "name")]
