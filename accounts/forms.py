from django import forms
from django.utils.translation import gettext_lazy as _

from accounts.preferences.timezones import time_zone_names
from accounts.tokens import NAME_MAX_LENGTH


class NewTokenForm(forms.Form):
    """Name and lifetime of a new token; the limits themselves are checked by ``tokens.clean_request``."""

    name = forms.CharField(label=_("Name"), max_length=NAME_MAX_LENGTH,
                           help_text=_("What uses it, e.g. \"CI pipeline\" or \"laptop\"."))
    days = forms.IntegerField(label=_("Valid for (days)"), required=False, min_value=1)


class PreferenceForm(forms.Form):
    """The time zone pages show times in; empty: the site's."""

    time_zone = forms.ChoiceField(label=_("Time zone"), required=False)

    def __init__(self, *args, site_zone: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = [("", _("The site's (%(zone)s)") % {"zone": site_zone}),
                                            *((name, name) for name in time_zone_names())]
