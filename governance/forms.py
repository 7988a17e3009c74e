"""The request form carries what the user typed; ``services.validate_request`` (shared with the API)
checks it and its messages are attached to the fields."""

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from scheduling.models import TaskType
from tenants.models import Tenant

from . import services
from .models import NotificationKind, RequestKind

KIND_CHOICES = [(k.value, k.label) for k in RequestKind if k != RequestKind.ADMISSION]


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
                                          help_text=_("Longer runtime: up to 43200 (30 days)."))
    tenant = forms.ChoiceField(label=_("Tenant"), required=False,
                               help_text=_("Burst, reservation and quota: the tenant concerned."))
    gpu_model = forms.CharField(label=_("GPU model"), required=False, max_length=64)
    gpus = forms.CharField(label=_("GPUs"), required=False, help_text=_("Burst: GPUs above the limit; reservation: "
                                                                       "GPUs held for the tenant."))
    start = forms.CharField(label=_("From"), required=False,
                            widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    end = forms.CharField(label=_("Until"), required=False,
                          widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    guaranteed = forms.CharField(label=_("Guaranteed GPUs"), required=False,
                                 help_text=_("Quota change (tenant admins)."))
    limit = forms.CharField(label=_("Limit GPUs"), required=False, help_text=_("Quota change (tenant admins)."))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["task_type"].choices = [("", "—")] + [(t.code, f"{t.name} ({t.priority})")
                                                          for t in TaskType.objects.all()]
        self.fields["tenant"].choices = [("", "—")] + [(t.name, t.name) for t in Tenant.objects.visible_to(user)]

    def submit(self):
        if not self.is_valid():
            return None
        try:
            return services.submit_request(self.user, {k: v for k, v in self.cleaned_data.items() if v != ""})
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
