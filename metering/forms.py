"""Forms of the metering pages. Each carries what the user typed; the services check it and their messages
are attached to the fields, so a refused form re-renders with the input kept and the field named."""

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from fleet.catalogue import gpu_model_catalogue
from gpuportal.web.validation import calendar_month
from metering.acceptance import checklist as acceptance
from metering.improvements import services as improvements
from metering.improvements.queries import edited_value, shown_value, stored_value
from metering.models import AcceptanceArea, ImprovementDirection, ImprovementMetric, ImprovementStatus
from tenants.models import Tenant

# --- improvement actions --------------------------------------------------------------------

TARGET_HELP = _("Optional. In the metric's unit as the report shows it: hours for waits, percent for shares "
                "and rates, days, GPU-hours.")


class _MonthField(forms.CharField):
    """``YYYY-MM`` -> the first day of that month; the message names the form expected."""

    def __init__(self, **kwargs):
        super().__init__(max_length=7, widget=forms.TextInput(attrs={"placeholder": "2026-10", "size": 8}),
                         **kwargs)

    def clean(self, value):
        value = super().clean(value)
        if value in self.empty_values:
            return None
        try:
            return calendar_month(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


def _owner_field():
    return forms.ModelChoiceField(label=_("Owner"), required=False, empty_label="—", to_field_name="username",
                                  queryset=get_user_model().objects.filter(is_active=True).order_by("username"))


class _ActionForm(forms.Form):
    """Shared by creating and editing: the service's errors go to their fields."""

    def _apply(self, write):
        if not self.is_valid():
            return None
        try:
            return write(self.cleaned_data)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, messages)
        return None

    def _target(self, metric: str):
        """The target as typed (hours, percent) in the report's unit."""
        return stored_value(metric, self.cleaned_data.get("target"))


class ActionCreateForm(_ActionForm):
    title = forms.CharField(label=pgettext_lazy("improvement action", "Action"), max_length=improvements.MAX_TITLE)
    month = _MonthField(label=_("Report month"), help_text=_("The month whose report recommended it (YYYY-MM)."))
    tenant = forms.ChoiceField(label=_("Tenant"), required=False, help_text=_("Empty: the platform report."))
    gpu_model = forms.ChoiceField(label=_("GPU model"), required=False,
                                  help_text=_("Empty: the metric over the whole report."))
    recommendation = forms.CharField(label=_("Recommendation"), required=False,
                                     max_length=improvements.MAX_RECOMMENDATION,
                                     widget=forms.Textarea(attrs={"rows": 2}))
    metric = forms.ChoiceField(label=_("Metric"), choices=ImprovementMetric.choices)
    direction = forms.ChoiceField(label=_("Expected effect"), choices=ImprovementDirection.choices)
    target = forms.FloatField(label=_("Target"), required=False, help_text=TARGET_HELP)
    due_month = _MonthField(label=_("Due month"), help_text=_("YYYY-MM, not before the report month."))
    notes = forms.CharField(label=_("Notes"), required=False, max_length=improvements.MAX_NOTES,
                            widget=forms.Textarea(attrs={"rows": 3}))

    field_order = ["title", "month", "tenant", "gpu_model", "recommendation", "metric", "direction", "target",
                   "owner", "due_month", "notes"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["owner"] = _owner_field()
        self.fields["tenant"].choices = [("", _("— platform —"))] + [
            (name, name) for name in Tenant.objects.order_by("name").values_list("name", flat=True)]
        models = sorted(gpu_model_catalogue())
        typed = (self.data.get("gpu_model") if self.is_bound else self.initial.get("gpu_model")) or ""
        if typed and typed not in models:  # a model of an old report, gone from the fleet
            models.append(typed)
        self.fields["gpu_model"].choices = [("", "—")] + [(m, m) for m in models]
        self.order_fields(self.field_order)

    def save(self, actor):
        return self._apply(lambda data: improvements.create_action(
            actor, month=data["month"], tenant=Tenant.objects.filter(name=data["tenant"]).first()
            if data["tenant"] else None, title=data["title"], owner=data["owner"], due_month=data["due_month"],
            metric=data["metric"], direction=data["direction"], target=self._target(data["metric"]),
            gpu_model=data["gpu_model"], recommendation=data["recommendation"], notes=data["notes"]))


class ActionEditForm(_ActionForm):
    title = forms.CharField(label=pgettext_lazy("improvement action", "Action"), max_length=improvements.MAX_TITLE)
    status = forms.ChoiceField(label=_("Status"), choices=ImprovementStatus.choices)
    due_month = _MonthField(label=_("Due month"), help_text=_("YYYY-MM, not before the report month."))
    target = forms.FloatField(label=_("Target"), required=False, help_text=TARGET_HELP)
    notes = forms.CharField(label=_("Notes"), required=False, max_length=improvements.MAX_NOTES,
                            widget=forms.Textarea(attrs={"rows": 3}))
    reason = forms.CharField(label=_("Reason for the change"), max_length=improvements.MAX_REASON,
                             help_text=_("Recorded in the audit log with your name."))

    def __init__(self, *args, action, **kwargs):
        self.action = action
        kwargs.setdefault("initial", {
            "title": action.title, "status": action.status, "owner": action.owner.username if action.owner else "",
            "due_month": f"{action.due_month:%Y-%m}", "target": shown_value(action.metric, action.target),
            "notes": action.notes})
        super().__init__(*args, **kwargs)
        self.fields["owner"] = _owner_field()
        self.order_fields(["title", "status", "owner", "due_month", "target", "notes", "reason"])

    def save(self, actor):
        return self._apply(lambda data: improvements.update_action(
            actor, self.action, data["reason"], title=data["title"], status=data["status"], owner=data["owner"],
            due_month=data["due_month"], target=self._edited_target(), notes=data["notes"]))

    def _edited_target(self):
        """The target typed, or the stored one where it is still the rounded figure the form showed."""
        return edited_value(self.action.metric, self.cleaned_data.get("target"), self.action.target)


class ActionDeleteForm(_ActionForm):
    reason = forms.CharField(label=_("Reason for removing it"), max_length=improvements.MAX_REASON,
                             help_text=_("Recorded in the audit log with everything the action held."))

    def __init__(self, *args, action, **kwargs):
        self.action = action
        super().__init__(*args, prefix="delete", **kwargs)

    def save(self, actor):
        return self._apply(lambda data: improvements.delete_action(actor, self.action, data["reason"]) or True)


# --- acceptance notes ---------------------------------------------------------------------------

#: The screenshot formats kept, known by their first bytes (a file's name and the browser's type prove nothing).
IMAGE_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))


class AcceptanceNoteForm(forms.Form):
    """A pilot's note on a checklist row: text, the configuration used, a screenshot (PNG or JPEG, bounded)."""

    area = forms.ChoiceField(label=_("Area"), choices=AcceptanceArea.choices, widget=forms.HiddenInput)
    text = forms.CharField(label=_("Note"), required=False, max_length=acceptance.MAX_TEXT,
                           widget=forms.Textarea(attrs={"rows": 3}))
    configuration = forms.CharField(label=_("Configuration"), required=False, max_length=acceptance.MAX_CONFIGURATION,
                                    widget=forms.Textarea(attrs={"rows": 4}),
                                    help_text=_("The settings, versions or commands the evidence was gathered with."))
    # lazy: the help text is filled in the reader's language when the form is shown, not at import
    screenshot = forms.FileField(label=_("Screenshot"), required=False,
                                 help_text=lazy(lambda: str(_("PNG or JPEG, at most %(mb)d MB.")) % {
                                     "mb": acceptance.SCREENSHOT_MAX_BYTES // (1024 * 1024)}, str)())

    def clean_screenshot(self):
        upload = self.cleaned_data.get("screenshot")
        if not upload:
            return None
        limit_mb = acceptance.SCREENSHOT_MAX_BYTES // (1024 * 1024)
        if upload.size > acceptance.SCREENSHOT_MAX_BYTES:
            raise ValidationError(_("Screenshot: at most %(max)d MB; this file has %(size).1f MB.") % {
                "max": limit_mb, "size": upload.size / (1024 * 1024)})
        head = upload.read(8)
        upload.seek(0)
        for signature, content_type in IMAGE_SIGNATURES:
            if head.startswith(signature):
                upload.checked_type = content_type
                return upload
        raise ValidationError(_("Screenshot: only a PNG or JPEG image (at most %(max)d MB); this file is neither.")
                              % {"max": limit_mb})

    def clean(self):
        data = super().clean()
        if not self.errors and not (data.get("text", "").strip() or data.get("configuration", "").strip()
                                    or data.get("screenshot")):
            self.add_error("text", _("Write a note, paste a configuration or attach a screenshot."))
        return data

    def save(self, actor):
        data = self.cleaned_data
        upload = data["screenshot"]
        return acceptance.add_note(actor, data["area"], data["text"].strip(), data["configuration"].strip(),
                                   screenshot=upload.read() if upload else None,
                                   screenshot_name=upload.name if upload else "",
                                   screenshot_type=upload.checked_type if upload else "")
