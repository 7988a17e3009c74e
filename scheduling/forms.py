"""The submit form, built from ``submission.SUBMIT_FIELDS``. Its fields only carry what the user typed (as
text, so a bad value comes back as typed); every rule is checked by ``submission.validate_job_request``
(shared with the API), whose messages are attached to the fields."""

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from fleet.catalogue import gpu_model_catalogue

from . import submission
from .models import TaskType, Topology

#: Fields the page does not show: the project names its tenant; preempted jobs requeue.
NOT_ON_PAGE = ("tenant", "requeue_on_preemption")
CHOICE_FIELDS = ("project", "task_type", "gpu_model", "topology")


def _form_field(spec: submission.SubmitField) -> forms.Field:
    common = {"label": spec.label, "help_text": spec.help_text, "required": False}
    if spec.name in CHOICE_FIELDS:  # a choice the page offers must be one of its options
        required = spec.required or spec.name == "project"  # the page always names the project
        return forms.ChoiceField(choices=spec.choices, initial=spec.default, **(common | {"required": required}))
    if spec.kind in ("int", "float"):
        attrs = {k: v for k, v in (("min", spec.min_value), ("max", spec.max_value)) if v is not None}
        if spec.kind == "float" and spec.max_value is not None:
            attrs["step"] = spec.min_value
        return forms.CharField(initial=spec.default, widget=forms.NumberInput(attrs=attrs), **common)
    if spec.name == "command":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), **common)
    if spec.name == "image":
        return forms.CharField(widget=forms.TextInput(attrs={"placeholder": "registry.local/pytorch:2.4-cuda12"}),
                               **common)
    return forms.CharField(**common)


class JobSubmitForm(forms.Form):
    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        for spec in submission.SUBMIT_FIELDS:
            if spec.name not in NOT_ON_PAGE:
                self.fields[spec.name] = _form_field(spec)
        self.fields["project"].choices = [(f"{p.tenant.name}/{p.name}", f"{p.tenant.name} / {p.name}")
                                          for p in submission.submittable_projects(user)]
        self.fields["task_type"].choices = [
            (t.code, _("%(name)s (priority %(p)d%(approval)s)") % {
                "name": t.name, "p": t.priority, "approval": _(", needs approval") if t.requires_approval else ""})
            for t in TaskType.objects.all()]
        if not self.is_bound and TaskType.objects.filter(code="research").exists():
            self.initial.setdefault("task_type", "research")
        self.fields["gpu_model"].choices = [
            (c.gpu_model, _("%(model)s (%(n)d nodes, up to %(g)d GPUs per node)") % {
                "model": c.gpu_model, "n": c.nodes, "g": c.max_gpus_per_node})
            for c in gpu_model_catalogue().values()]
        self.fields["topology"].choices = Topology.choices

    def submit(self):
        """Submit through the shared service; on a rule violation attach each message to its field."""
        if not self.is_valid():
            return None
        try:
            return submission.submit_job(self.user, self.cleaned_data)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, messages)
            return None
