"""The submit form, built from ``submission.SUBMIT_FIELDS``, and the template forms. The submit form's fields
only carry what the user typed (as text, so a bad value comes back as typed); every rule is checked by
``submission.validate_job_request`` (shared with the API), whose messages are attached to the fields, and the
typed request it returns is what ``submission.create_jobs`` stores. Started from a template, it also shows the
template's parameters (``param_<name>``) and submits through ``scheduling.templates.services.apply_template``,
the rule the API and the CLI use. The template forms' limits are the template service's."""

import json

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from fleet.catalogue import gpu_model_catalogue
from scheduling.jobs import queries, sbatch, submission
from scheduling.models import TaskType, Topology, WorkloadKind
from scheduling.templates import services as job_templates

#: Fields the page does not show: the project names its tenant; preempted jobs requeue; sparing one's own jobs
#: is offered by the warning that names them (templates/scheduling/_own_preemptions.html).
NOT_ON_PAGE = ("tenant", "requeue_on_preemption", "spare_own_jobs")
CHOICE_FIELDS = ("project", "task_type", "gpu_model", "topology", "kind")
#: The kinds that use a field (static/js/fields_by_kind.js shows only those of the chosen kind); others: every kind.
FIELDS_BY_KIND = {"replicas": (WorkloadKind.SERVICE,), "port": (WorkloadKind.SERVICE,),
                  "array": (WorkloadKind.ARRAY,), "array_parallelism": (WorkloadKind.ARRAY,),
                  "nodes": (WorkloadKind.BATCH, WorkloadKind.ARRAY),
                  "topology": (WorkloadKind.BATCH, WorkloadKind.ARRAY),
                  "ports": (WorkloadKind.BATCH, WorkloadKind.NOTEBOOK, WorkloadKind.ARRAY)}
#: Prefix of the parameter fields of a template on the submit form.
PARAM_PREFIX = "param_"


def _form_field(spec: submission.SubmitField) -> forms.Field:
    field = _plain_form_field(spec)
    if spec.name in FIELDS_BY_KIND:
        field.widget.attrs["data-kinds"] = " ".join(FIELDS_BY_KIND[spec.name])
    if spec.name == "template_version":
        field.widget = forms.HiddenInput()
    return field


def _parameter_field(parameter: dict) -> forms.Field:
    """A template parameter as a form field (text, so a bad value comes back as typed and is reported by
    ``job_templates.parse_value``, naming the parameter)."""
    name = parameter["name"]
    help_text = parameter.get("help") or ""
    where = _("Written into the command where it says {%(name)s}.") % {"name": name}
    common = {"label": parameter.get("label") or name, "required": False,
              "help_text": f"{help_text} {where}".strip(), "initial": parameter.get("default")}
    if parameter["type"] == "choice":
        return forms.ChoiceField(choices=[(str(c), str(c)) for c in parameter.get("choices") or []], **common)
    if parameter["type"] == "bool":
        common["initial"] = "true" if parameter.get("default") in (True, "true") else "false"
        return forms.ChoiceField(choices=[("true", _("yes")), ("false", _("no"))], **common)
    if parameter["type"] in ("int", "float"):
        attrs = {k: v for k, v in (("min", parameter.get("min")), ("max", parameter.get("max"))) if v is not None}
        if parameter["type"] == "float":
            attrs["step"] = "any"
        return forms.CharField(widget=forms.NumberInput(attrs=attrs), **common)
    return forms.CharField(**common)


class ListTextField(forms.CharField):
    """A list submit field typed as text, its entries separated by commas (the rule reads them so); a list it
    starts from (a clone's ports) is shown the same way."""

    def prepare_value(self, value):
        return ", ".join(str(v) for v in value) if isinstance(value, list | tuple) else super().prepare_value(value)


def _plain_form_field(spec: submission.SubmitField) -> forms.Field:
    common = {"label": spec.label, "help_text": spec.help_text, "required": False}
    if spec.kind == "list":
        return ListTextField(widget=forms.TextInput(attrs={"placeholder": "tensorboard:6006, ui:8080",
                                                           "spellcheck": "false"}), **common)
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
    if spec.name == "sbatch":  # kept as typed, blank lines and all: its line numbers are those of the messages
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "code",
                                                            "placeholder": "#!/bin/bash\n#SBATCH --gres=gpu:1"}),
                               strip=False, **common)
    if spec.name == "image":
        return forms.CharField(widget=forms.TextInput(attrs={"placeholder": "registry.local/pytorch:2.4-cuda12"}),
                               **common)
    return forms.CharField(**common)


class JobSubmitForm(forms.Form):
    """``version``: the template version the form starts from (its parameters are shown and applied);
    ``initial`` may prefill any submit field (a template's defaults, a cloned job's request)."""

    def __init__(self, *args, user, version=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.version = version
        for spec in submission.SUBMIT_FIELDS:
            if spec.name not in NOT_ON_PAGE:
                self.fields[spec.name] = _form_field(spec)
        projects = submission.submittable_projects(user)
        self.fields["project"].choices = [(f"{p.tenant.name}/{p.name}", f"{p.tenant.name} / {p.name}")
                                          for p in projects]
        self.fields["task_type"].choices = [
            (t.code, _("%(name)s (priority %(p)d%(approval)s)") % {
                "name": t.display_name, "p": t.priority,
                "approval": _(", needs approval") if t.requires_approval else ""})
            for t in TaskType.objects.all()]
        if not self.is_bound and TaskType.objects.filter(code="research").exists():
            self.initial.setdefault("task_type", "research")
        self.fields["gpu_model"].choices = [
            (c.gpu_model, _("%(model)s (%(n)d nodes, up to %(g)d GPUs per node)") % {
                "model": c.gpu_model, "n": c.nodes, "g": c.max_gpus_per_node})
            for c in gpu_model_catalogue().values()]
        if not self.is_bound and not self.initial.get("gpu_model"):  # not one whose quota is used up
            usable = queries.usable_gpu_model(user, [m for m, _label in self.fields["gpu_model"].choices],
                                              {p.tenant.name for p in projects})
            if usable:
                self.initial["gpu_model"] = usable
        self.fields["topology"].choices = Topology.choices
        self.fields["kind"].choices = WorkloadKind.choices
        if version is not None:
            self._add_template(version)

    def _add_template(self, version) -> None:
        """The template's parameters: those named like a submit field prefill it, the others get fields of
        their own; ``use_template`` carries the version through the POST."""
        self.fields["use_template"] = forms.CharField(widget=forms.HiddenInput(), required=False,
                                                      initial=version.pk)
        for parameter in version.shown_parameters():
            name = parameter["name"]
            if name in self.fields and name not in NOT_ON_PAGE:
                if parameter.get("default") is not None and not self.is_bound:
                    self.initial[name] = parameter["default"]
                continue
            self.fields[PARAM_PREFIX + name] = _parameter_field(parameter)

    @property
    def parameter_fields(self):
        return [self[name] for name in self.fields if name.startswith(PARAM_PREFIX)]

    def _request(self) -> dict:
        """The submission: the fields as typed, through the template's rule when the form started from one."""
        fields = {k: v for k, v in self.cleaned_data.items() if not k.startswith(PARAM_PREFIX) and k != "use_template"}
        if (fields.get("sbatch") or "").strip():
            # The page fills some fields in (1 GPU, a usable model...): one the person did not change is left to
            # the batch script, so that only what they typed can disagree with it.
            fields = {k: v for k, v in fields.items() if k not in sbatch.SCRIPT_FIELDS or not self._as_offered(k, v)}
        if self.version is None:
            return fields
        parameters = {name.removeprefix(PARAM_PREFIX): value for name, value in self.cleaned_data.items()
                      if name.startswith(PARAM_PREFIX)}
        for parameter in self.version.parameters:  # shown as the submit field of the same name
            if parameter["name"] not in parameters and parameter["name"] in fields:
                parameters[parameter["name"]] = fields[parameter["name"]]
        return job_templates.apply_template(self.version, parameters, fields)

    def _as_offered(self, name: str, value) -> bool:
        """Whether a field still holds what the page put in it (compared as text: the page offers numbers)."""
        offered = self[name].initial
        return str(offered if offered is not None else "").strip() == str(value if value is not None else "").strip()

    def submit(self, extra: dict | None = None, confirm=None):
        """Submit through the shared service; on a rule violation attach each message to its field.

        The service's rules run even when a field was already refused here (an option not offered), so that
        every refusal shows at once rather than one round at a time; a field keeps its first refusal. ``extra``
        adds submit fields the page does not show; ``confirm`` sees the checked request and may stop it before
        anything is stored (returning False)."""
        valid = self.is_valid()
        try:
            request = submission.validate_job_request(self.user, {**self._request(), **(extra or {})})
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                if field.startswith("parameters."):
                    name = field.removeprefix("parameters.")
                    field = PARAM_PREFIX + name if PARAM_PREFIX + name in self.fields else name
                if field not in self.errors:
                    self.add_error(field if field in self.fields else None, messages)
            return None
        if not valid:
            return None
        if confirm is not None and not confirm(request):  # the page asks first (its own jobs it would stop)
            return None
        return submission.create_jobs(self.user, request)


# --- templates -----------------------------------------------------------------------------------------------

PARAMETERS_HELP = _('A JSON list, e.g. [{"name": "epochs", "type": "int", "default": 10, "label": "Epochs", '
                    '"help": "Passed as --epochs"}]. Types: "int", "float", "text", "choice" (with "choices": [...]), '
                    '"bool". A parameter named like a submit field ("gpus_per_node", "image", "replicas"...) sets it; '
                    'the others replace {name} in the command.')
DEFAULTS_HELP = _('A JSON object of submit fields, e.g. {"task_type": "research", "gpu_model": "A100", '
                  '"image": "registry.local/pytorch:2.4-cuda12", "command": "python train.py --epochs {epochs}"}.')


def _json_field(label, help_text, rows: int) -> forms.CharField:
    return forms.CharField(label=label, help_text=help_text, required=False,
                           widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false", "class": "code"}))


class TemplateContentForm(forms.Form):
    """A version's content: parameters and defaults as JSON text (kept as typed when refused), a change note.
    The service's messages (``job_templates``) are attached to the fields."""

    parameters = _json_field(_("Parameters"), PARAMETERS_HELP, 10)
    defaults = _json_field(_("Defaults"), DEFAULTS_HELP, 8)
    note = forms.CharField(label=_("Change note"), required=False, max_length=job_templates.MAX_NOTE,
                           help_text=_("What this version changes; shown in its history."))

    def _json(self, name: str, empty):
        text = self.cleaned_data.get(name, "").strip()
        if not text:
            return empty
        try:
            return json.loads(text)
        except ValueError as bad:
            raise ValidationError(_("Not valid JSON: %(why)s.") % {"why": bad}) from None

    def clean_parameters(self):
        return self._json("parameters", [])

    def clean_defaults(self):
        return self._json("defaults", {})

    def attach(self, exc: ValidationError) -> None:
        for field, messages in exc.message_dict.items():
            self.add_error(field if field in self.fields else None, messages)


class TemplateCreateForm(TemplateContentForm):
    """A new template: whose (the tenants the user administers; the platform for platform admins), its name,
    kind and description, then version 1's content."""

    PLATFORM = "__platform__"

    tenant = forms.ChoiceField(label=_("Owner"), help_text=_("A tenant's template is offered to its members only."))
    name = forms.CharField(label=_("Name"), max_length=job_templates.MAX_NAME)
    kind = forms.ChoiceField(label=_("Kind"), choices=WorkloadKind.choices, initial=WorkloadKind.BATCH)
    description = forms.CharField(label=_("Description"), required=False, max_length=job_templates.MAX_DESCRIPTION,
                                  widget=forms.Textarea(attrs={"rows": 2}))
    field_order = ["tenant", "name", "kind", "description", "parameters", "defaults", "note"]

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        choices = [(t.name, t.display_name or t.name) for t in job_templates.manageable_tenants(user)]
        if job_templates.can_manage(user, None):
            choices.insert(0, (self.PLATFORM, _("The platform (every tenant)")))
        self.fields["tenant"].choices = choices
        self.tenants = {t.name: t for t in job_templates.manageable_tenants(user)}

    def owner(self):
        return self.tenants.get(self.cleaned_data["tenant"])
