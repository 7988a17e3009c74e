"""The request form carries what the user typed; ``services.validate_request`` (shared with the API)
checks it and its messages are attached to the fields. The limits the form shows are the service's."""

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _

from fleet.catalogue import gpu_model_catalogue
from governance import services
from governance.models import NotificationKind, RequestKind
from scheduling.models import TaskType
from tenants.models import Tenant

KIND_CHOICES = [(k.value, k.label) for k in RequestKind if k != RequestKind.ADMISSION]

#: The fields each kind of request uses (``services.validate_request`` reads exactly these); the page shows
#: only the chosen kind's (``static/js/fields_by_kind.js``; without scripts every field shows).
FIELDS_BY_KIND = {
    RequestKind.PRIORITY: ("job", "task_type"),
    RequestKind.RUNTIME_EXTENSION: ("job", "max_runtime_minutes"),
    RequestKind.BURST: ("tenant", "gpu_model", "gpus", "start", "end"),
    RequestKind.RESERVATION: ("tenant", "gpu_model", "gpus", "start", "end"),
    RequestKind.QUOTA: ("tenant", "gpu_model", "guaranteed", "limit"),
}


def _runtime_help():
    """The longest runtime an extension may ask for, in the reader's language when the form is shown (lazy:
    not at import)."""
    most = services.MAX_EXTENDED_RUNTIME_MINUTES
    return lazy(lambda: str(_("Longer runtime: up to %(max)d (%(days)d days).")) % {
        "max": most, "days": most // (24 * 60)}, str)()


class RequestForm(forms.Form):
    kind = forms.ChoiceField(label=_("What do you ask for?"), choices=KIND_CHOICES)
    justification = forms.CharField(label=_("Justification"), widget=forms.Textarea(attrs={"rows": 4}),
                                    required=False, max_length=services.MAX_JUSTIFICATION,
                                    help_text=_("Why, for whom, until when: approvers decide from it."))
    job = forms.CharField(label=_("Job id"), required=False,
                          help_text=_("Higher priority and longer runtime: the job concerned."))
    task_type = forms.ChoiceField(label=_("Wanted task type"), required=False,
                                  help_text=_("Higher priority: the priority class to move the job to."))
    max_runtime_minutes = forms.CharField(label=_("New max runtime (minutes)"), required=False,
                                          help_text=_runtime_help())
    tenant = forms.ChoiceField(label=_("Tenant"), required=False,
                               help_text=_("Burst, reservation and quota: the tenant concerned."))
    gpu_model = forms.ChoiceField(label=_("GPU model"), required=False)
    gpus = forms.CharField(label=_("GPUs"), required=False, help_text=_("Burst: GPUs above the limit; reservation: "
                                                                       "GPUs held for the tenant."))
    start = forms.CharField(label=_("From"), required=False, max_length=64,
                            widget=forms.TextInput(attrs={"type": "datetime-local"}))
    end = forms.CharField(label=_("Until"), required=False, max_length=64,
                          widget=forms.TextInput(attrs={"type": "datetime-local"}))
    guaranteed = forms.CharField(label=_("Guaranteed GPUs"), required=False,
                                 help_text=_("Quota change (tenant admins)."))
    limit = forms.CharField(label=_("Limit GPUs"), required=False, help_text=_("Quota change (tenant admins)."))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["task_type"].choices = [("", "—")] + [(t.code, t.label)
                                                          for t in TaskType.objects.all()]
        self.fields["tenant"].choices = [("", "—")] + [(t.name, t.name) for t in Tenant.objects.visible_to(user)]
        self.fields["gpu_model"].choices = [("", "—")] + [
            (name, _("%(m)s (%(n)s GPUs in the fleet)") % {"m": name, "n": f"{model.total_gpus:,}"})
            for name, model in gpu_model_catalogue().items()]
        zone = timezone.get_current_timezone_name()
        for name in ("start", "end"):
            self.fields[name].help_text = _("ISO 8601, in your time zone (%(tz)s): for example %(e)s.") % {
                "tz": zone, "e": "2026-12-01T09:00"}
        kinds: dict[str, list[str]] = {}
        for kind, names in FIELDS_BY_KIND.items():
            for name in names:
                kinds.setdefault(name, []).append(kind.value)
        for name, used_by in kinds.items():
            self.fields[name].widget.attrs["data-kinds"] = " ".join(used_by)

    def submit(self, confirm=None):
        """Send the request (``services.submit_request``; ``confirm`` may stop it once previewed)."""
        if not self.is_valid():
            return None
        try:
            return services.submit_request(self.user, {k: v for k, v in self.cleaned_data.items() if v != ""},
                                           confirm)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, messages)
            return None


class PreferencesForm(forms.Form):
    """One pair of checkboxes (in the portal / by email) per kind of notification."""

    def __init__(self, *args, initial_choices: dict, **kwargs):
        super().__init__(*args, **kwargs)
        for kind in NotificationKind:
            in_app, email = initial_choices[kind.value]
            self.fields[f"{kind.value}__app"] = forms.BooleanField(label=kind.label, required=False, initial=in_app)
            self.fields[f"{kind.value}__email"] = forms.BooleanField(label=kind.label, required=False, initial=email)

    def rows(self):
        return [(kind.label, self[f"{kind.value}__app"], self[f"{kind.value}__email"]) for kind in NotificationKind]
