from django import forms
from django.utils.translation import gettext_lazy as _

from .tokens import NAME_MAX_LENGTH


class NewTokenForm(forms.Form):
    """Name and lifetime of a new token; the limits themselves are checked by ``tokens.clean_request``."""

    name = forms.CharField(label=_("Name"), max_length=NAME_MAX_LENGTH,
                           help_text=_("What uses it, e.g. \"CI pipeline\" or \"laptop\"."))
    days = forms.IntegerField(label=_("Valid for (days)"), required=False, min_value=1)
