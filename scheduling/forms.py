"""The submit form. Its fields only carry what the user typed; every rule is checked by
``services.validate_job_request`` (shared with the API), whose messages are attached to the fields."""

from django import forms
from django.utils.translation import gettext_lazy as _

from . import services
from .models import TaskType, Topology


class JobSubmitForm(forms.Form):
    project = forms.ChoiceField(label=_("Project"))
    name = forms.CharField(label=_("Name"), required=False, help_text=_("Optional; a name is made up if empty."))
    task_type = forms.ChoiceField(label=_("Task type"))
    gpu_model = forms.ChoiceField(label=_("GPU model"))
    gpus_per_node = forms.CharField(label=_("GPUs per node"), initial="1",
                                    widget=forms.NumberInput(attrs={"min": 1}))
    nodes = forms.CharField(label=_("Nodes"), initial="1", widget=forms.NumberInput(attrs={"min": 1}))
    topology = forms.ChoiceField(label=_("Topology"), choices=Topology.choices, initial=Topology.ANY, required=False,
                                 help_text=_("Where the nodes of a multi-node job must be."))
    gpu_share = forms.CharField(label=_("GPU share"), required=False, initial="1",
                                widget=forms.NumberInput(attrs={"min": 0.05, "max": 1, "step": 0.05}),
                                help_text=_("Below 1 (e.g. 0.25): a share of one GPU, packed with others."))
    cpus_per_node = forms.CharField(label=_("CPUs per node"), required=False, widget=forms.NumberInput(),
                                    help_text=_("Empty: the task type's CPUs per GPU."))
    memory_gb_per_node = forms.CharField(label=_("Memory per node (GB)"), required=False,
                                         widget=forms.NumberInput(), help_text=_("Empty: the task type's default."))
    image = forms.CharField(label=_("Image"), required=False,
                            widget=forms.TextInput(attrs={"placeholder": "registry.local/pytorch:2.4-cuda12"}))
    command = forms.CharField(label=_("Command"), required=False, widget=forms.Textarea(attrs={"rows": 3}))
    max_runtime_minutes = forms.CharField(
        label=_("Max runtime (minutes)"), required=False, widget=forms.NumberInput(attrs={"min": 1}),
        help_text=_("Empty: the task type's default."))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["project"].choices = [(f"{p.tenant.name}/{p.name}", f"{p.tenant.name} / {p.name}")
                                          for p in services.submittable_projects(user)]
        self.fields["task_type"].choices = [
            (t.code, _("%(name)s (priority %(p)d%(approval)s)") % {
                "name": t.name, "p": t.priority, "approval": _(", needs approval") if t.requires_approval else ""})
            for t in TaskType.objects.all()]
        if not self.is_bound and TaskType.objects.filter(code="research").exists():
            self.initial.setdefault("task_type", "research")
        self.fields["gpu_model"].choices = [
            (c.gpu_model, _("%(model)s (%(n)d nodes, up to %(g)d GPUs per node)") % {
                "model": c.gpu_model, "n": c.nodes, "g": c.max_gpus_per_node})
            for c in services.gpu_model_catalogue().values()]

    def submit(self):
        """Submit through the shared service; on a rule violation attach each message to its field."""
        from django.core.exceptions import ValidationError

        if not self.is_valid():
            return None
        try:
            return services.submit_job(self.user, self.cleaned_data)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, messages)
            return None
