"""Batch scripts in: a Slurm ``sbatch`` script's ``#SBATCH`` directives read as submit fields.

People who use Slurm already have their jobs as batch scripts; the portal takes such a script as it is
(the ``sbatch`` submit field, from the form, the API and ``gpuportal submit --sbatch``) instead of asking
them to copy each option into a form field by hand. The directives fill the submit fields the request leaves
empty and the script's body becomes the command, so the job then goes through ``validate_job_request`` like
any other and runs on whichever executor places it (simulated, Kubernetes or Slurm): the script describes
the job, not the cluster.

Directives are read as sbatch reads them: ``#SBATCH`` lines before the first command (blank lines and
comments may come between them), each holding one or more options, long (``--opt=value`` or
``--opt value``) or short (``-J name``, ``-Jname``). Only the options that have a meaning here are taken;
any other is refused by name rather than dropped, so that nobody believes the portal honours an option it
ignores. Every refusal names the directive and its line.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from fleet.catalogue import gpu_model_catalogue
from fleet.models import Cluster
from scheduling.models import WorkloadKind

#: The most characters a script may have (the ``sbatch`` submit field's limit).
MAX_SCRIPT = 64 * 1024

PREFIX = "#SBATCH"

#: Short options sbatch has for the directives the portal takes, by their long names.
SHORT = {"-J": "--job-name", "-N": "--nodes", "-t": "--time", "-c": "--cpus-per-task", "-a": "--array",
         "-p": "--partition", "-G": "--gpus", "-d": "--dependency"}
#: The directives the portal takes, in the order its messages list them.
KNOWN = ("--job-name", "--gres", "--gpus", "--gpus-per-node", "--nodes", "--time", "--cpus-per-task", "--mem",
         "--array", "--partition", "--dependency", "--mail-type")

_TIME = re.compile(r"^(?:(\d{1,4})-)?(\d{1,6})(?::(\d{1,6}))?(?::(\d{1,6}))?$")
_MEMORY = re.compile(r"^(\d{1,12}(?:\.\d{1,6})?)([KMGT]?)$", re.IGNORECASE)
_ARRAY = re.compile(r"^([0-9,:\- ]+?)(?:%(\d{1,7}))?$")
_COUNT = re.compile(r"^\d{1,6}$")
#: GB (1024 MiB, as the submit field counts) per unit of ``--mem``; no suffix means megabytes.
_GB_PER_UNIT = {"K": 1 / 1024 / 1024, "M": 1 / 1024, "": 1 / 1024, "G": 1.0, "T": 1024.0}


@dataclass(frozen=True)
class Directive:
    """One option of an ``#SBATCH`` line: its long name, its value and where it was written."""

    line: int
    option: str
    value: str
    written: str

    def where(self) -> str:
        return _("#SBATCH %(directive)s (line %(line)d)") % {"directive": self.written, "line": self.line}


class ScriptFields(TypedDict, total=False):
    """The submit fields a script sets, in the submit fields' own names and units."""

    name: str
    gpu_model: str
    gpus_per_node: int
    nodes: int
    max_runtime_minutes: int
    cpus_per_node: float
    memory_gb_per_node: float
    kind: str
    array: str
    array_parallelism: int
    command: str
    depends_on: str
    mail_type: str


#: The submit fields a script may set.
SCRIPT_FIELDS = frozenset(ScriptFields.__annotations__)


@dataclass(frozen=True)
class SbatchScript:
    """A script read: the submit fields it sets, the directive each came from, the cluster ``--partition``
    names (empty: none) and the body (the command)."""

    fields: ScriptFields
    sources: dict[str, Directive]
    cluster: str
    body: str


@dataclass
class _Reading:
    """What the parse collects: fields with their sources, and the problems found, each naming its line."""

    fields: dict = field(default_factory=dict)
    sources: dict[str, Directive] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    cluster: str = ""

    def problem(self, directive: Directive, message: str) -> None:
        self.problems.append(_("%(where)s: %(problem)s") % {"where": directive.where(), "problem": message})

    def set(self, directive: Directive, name: str, value) -> None:
        """Set a field; two directives that set it to different values are refused, naming both."""
        earlier = self.sources.get(name)
        if earlier is not None and self.fields[name] != value:
            self.problem(directive, _("it disagrees with %(other)s about %(field)s.") % {
                "other": earlier.where(), "field": name})
            return
        self.fields[name], self.sources[name] = value, directive


def _directive_lines(lines: list[str]) -> tuple[list[tuple[int, str]], int]:
    """The ``#SBATCH`` lines before the first command (with their numbers, from 1), and the index of the
    line after the last of them."""
    found, end = [], 0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text.startswith(PREFIX) and (len(text) == len(PREFIX) or text[len(PREFIX)].isspace()):
            found.append((number, text[len(PREFIX):]))
            end = number
        elif text and not text.startswith("#"):
            break  # the first command: sbatch reads no directive after it
    return found, end


def _options(number: int, text: str, reading: _Reading) -> list[Directive]:
    """The options of one ``#SBATCH`` line (a ``#`` after a space starts a comment, as in sbatch)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        reading.problems.append(_("Line %(line)d: an unbalanced quote in #SBATCH%(text)s.") % {
            "line": number, "text": text})
        return []
    options, i = [], 0
    while i < len(words):
        word, i = words[i], i + 1
        short = word[:2] if re.match(r"^-[A-Za-z]", word) else ""
        if word.startswith("--"):
            option, equals, value = word.partition("=")
            written = word
        elif short:
            option, value, equals = SHORT.get(short, short), word[2:], "=" if len(word) > 2 else ""
            written = word
        else:
            reading.problems.append(_("Line %(line)d: %(word)r is not an option (options start with - or --).")
                                    % {"line": number, "word": word})
            continue
        if not equals and i < len(words) and not words[i].startswith("-"):
            value, i = words[i], i + 1  # "--opt value" / "-J value"
            written = f"{word} {value}"
        options.append(Directive(number, option, value, written))
    return options


def _count(directive: Directive, text: str, reading: _Reading) -> int | None:
    if not _COUNT.match(text) or int(text) < 1:
        reading.problem(directive, _("%(value)r is not a whole number of at least 1.") % {"value": text})
        return None
    return int(text)


def _model(directive: Directive, gpu_type: str, models: Iterable[str], reading: _Reading) -> None:
    """The catalogue's model a GRES type names (case-insensitively)."""
    known = sorted(models)
    match = next((m for m in known if m.lower() == gpu_type.lower()), None)
    if match is None:
        reading.problem(directive, _("GPU type %(type)r is no GPU model of the portal; it has: %(known)s.") % {
            "type": gpu_type, "known": ", ".join(known) or _("none yet")})
        return
    reading.set(directive, "gpu_model", match)


def _typed_count(directive: Directive, text: str, models: Iterable[str], reading: _Reading) -> int | None:
    """``[type:]n`` (``--gpus``, ``--gpus-per-node``): sets the model when a type is given; the count."""
    gpu_type, _sep, count = text.rpartition(":")
    if gpu_type:
        _model(directive, gpu_type, models, reading)
    return _count(directive, count, reading)


def _gres(directive: Directive, models: Iterable[str], reading: _Reading) -> None:
    """``--gres=gpu[:type][:n]``: GPUs per node (1 when no count is given)."""
    parts = directive.value.split(":")
    if parts[0] != "gpu" or len(parts) > 3 or "," in directive.value:
        reading.problem(directive, _("the portal takes only GPUs here, as gpu:<n> or gpu:<type>:<n>."))
        return
    count = parts[-1] if len(parts) > 1 and parts[-1].isascii() and parts[-1].isdigit() else "1"
    gpu_type = parts[1] if len(parts) == 3 or (len(parts) == 2 and not parts[1].isdigit()) else ""
    if gpu_type:
        _model(directive, gpu_type, models, reading)
    if (n := _count(directive, count, reading)) is not None:
        reading.set(directive, "gpus_per_node", n)


def _minutes(directive: Directive, reading: _Reading) -> None:
    """Slurm's time formats (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in whole minutes, rounded up."""
    match = _TIME.match(directive.value)
    if not match:
        reading.problem(directive, _("%(value)r is not a time limit; write minutes, MM:SS, HH:MM:SS, D-HH, "
                                     "D-HH:MM or D-HH:MM:SS.") % {"value": directive.value})
        return
    days, first, second, third = (int(g) if g is not None else None for g in match.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + first * 3600 + (second or 0) * 60 + (third or 0)
    elif third is not None:  # HH:MM:SS
        seconds = first * 3600 + second * 60 + third
    elif second is not None:  # MM:SS
        seconds = first * 60 + second
    else:  # minutes
        seconds = first * 60
    if seconds < 1:
        reading.problem(directive, _("a job here needs a time limit of at least one minute."))
        return
    reading.set(directive, "max_runtime_minutes", math.ceil(seconds / 60))


def _memory(directive: Directive, reading: _Reading) -> None:
    match = _MEMORY.match(directive.value)
    if not match or float(match[1]) <= 0:
        reading.problem(directive, _("%(value)r is not a memory size above 0, such as 500M, 64G or 1T (no "
                                     "suffix: megabytes).") % {"value": directive.value})
        return
    reading.set(directive, "memory_gb_per_node", float(match[1]) * _GB_PER_UNIT[match[2].upper()])


def _array(directive: Directive, reading: _Reading) -> None:
    """``--array=0-15%4``: the indices (checked further as the ``array`` submit field) and the tasks at once."""
    match = _ARRAY.match(directive.value)
    if not match:
        reading.problem(directive, _("%(value)r is not an array; write it like 0-15, 0-15:2, 1,3,5 or 0-15%%4.")
                        % {"value": directive.value})
        return
    reading.set(directive, "kind", WorkloadKind.ARRAY.value)
    reading.set(directive, "array", match[1].replace(" ", ""))
    if match[2] and (limit := _count(directive, match[2], reading)) is not None:
        reading.set(directive, "array_parallelism", limit)


def _nodes(directive: Directive, reading: _Reading) -> None:
    low, dash, high = directive.value.partition("-")
    if dash and low != high:
        reading.problem(directive, _("the portal runs a job on a fixed number of nodes; give one number, not the "
                                     "range %(value)s.") % {"value": directive.value})
        return
    if (n := _count(directive, low, reading)) is not None:
        reading.set(directive, "nodes", n)


def _partition(directive: Directive, clusters: Iterable[str], reading: _Reading) -> None:
    names = sorted(clusters)
    if directive.value not in names:
        reading.problem(directive, _("no cluster of the portal is called %(name)r; the clusters are: %(names)s.")
                        % {"name": directive.value, "names": ", ".join(names) or _("none yet")})
        return
    reading.cluster = directive.value


def _read(directive: Directive, models: Iterable[str], clusters: Iterable[str], reading: _Reading,
          gpus_total: list[Directive]) -> None:
    option, value = directive.option, directive.value
    if option not in KNOWN:
        reading.unknown.append(_("%(option)s (line %(line)d)") % {"option": option, "line": directive.line})
    elif not value:
        reading.problem(directive, _("it needs a value."))
    elif option == "--job-name":
        reading.set(directive, "name", value)
    elif option == "--gres":
        _gres(directive, models, reading)
    elif option == "--gpus-per-node":
        if (n := _typed_count(directive, value, models, reading)) is not None:
            reading.set(directive, "gpus_per_node", n)
    elif option == "--gpus":
        gpus_total.append(directive)
    elif option == "--nodes":
        _nodes(directive, reading)
    elif option == "--time":
        _minutes(directive, reading)
    elif option == "--cpus-per-task":
        if (n := _count(directive, value, reading)) is not None:
            reading.set(directive, "cpus_per_node", float(n))
    elif option == "--mem":
        _memory(directive, reading)
    elif option == "--array":
        _array(directive, reading)
    elif option == "--partition":
        _partition(directive, clusters, reading)
    elif option == "--dependency":  # checked as the ``depends_on`` submit field, naming this line when refused
        reading.set(directive, "depends_on", value.strip())
    elif option == "--mail-type":  # checked as the ``mail_type`` submit field, naming this line when refused
        reading.set(directive, "mail_type", value.strip())


def _per_job_gpus(directive: Directive, models: Iterable[str], reading: _Reading) -> None:
    """``--gpus=[type:]n`` counts GPUs of the whole job: divided evenly over ``--nodes``, else on one node."""
    total = _typed_count(directive, directive.value, models, reading)
    if total is None:
        return
    nodes = reading.fields.get("nodes")
    if nodes is None:
        reading.set(directive, "nodes", 1)
        nodes = 1
    if total % nodes:
        reading.problem(directive, _("%(gpus)d GPUs do not divide evenly over %(nodes)d nodes; the portal gives "
                                     "every node of a job the same GPUs.") % {"gpus": total, "nodes": nodes})
        return
    reading.set(directive, "gpus_per_node", total // nodes)


def _body(lines: list[str], end: int) -> str:
    """The command: the lines after the last directive, with the script's shebang kept in front."""
    rest = "\n".join(lines[end:]).strip("\n")
    if end and lines and lines[0].startswith("#!"):
        return f"{lines[0]}\n{rest}" if rest else lines[0]
    return rest


def parse_sbatch(script: str, models: Iterable[str] | None = None,
                 clusters: Iterable[str] | None = None) -> SbatchScript:
    """Read a batch script; ``ValidationError`` keyed ``sbatch`` with every problem (each naming its line).

    ``models`` are the GPU models a GRES type may name and ``clusters`` the cluster names ``--partition``
    may name; by default the portal's (the catalogue of its nodes, its clusters)."""
    models = list(gpu_model_catalogue() if models is None else models)
    clusters = list(Cluster.objects.values_list("name", flat=True) if clusters is None else clusters)
    lines = script.replace("\r\n", "\n").split("\n")
    found, end = _directive_lines(lines)
    reading, gpus_total = _Reading(), []
    for number, text in found:
        for directive in _options(number, text, reading):
            _read(directive, models, clusters, reading, gpus_total)
    for directive in gpus_total:  # after --nodes, wherever it was written
        _per_job_gpus(directive, models, reading)
    if reading.unknown:
        reading.problems.insert(0, _("The portal does not take these directives: %(unknown)s. It takes: "
                                     "%(known)s.") % {"unknown": ", ".join(reading.unknown),
                                                      "known": ", ".join(KNOWN)})
    if reading.problems:
        raise ValidationError({"sbatch": reading.problems})
    body = _body(lines, end)
    fields = ScriptFields(**reading.fields)
    sources = dict(reading.sources)
    if body.strip():
        fields["command"] = body
    return SbatchScript(fields=fields, sources=sources, cluster=reading.cluster, body=body)


@dataclass(frozen=True)
class ScriptRequest:
    """A submission with its script applied: the submit fields (the script's filling those left empty), the
    script read, and the fields set both ways to different values (field → the sentence naming both)."""

    data: dict
    script: SbatchScript
    conflicts: dict[str, str]


def _same(value, ours) -> bool:
    """Whether a field's value as sent (text from the form, typed from the API) is the script's value."""
    if isinstance(ours, str):
        return str(value).strip() == ours.strip()
    try:
        return float(value) == float(ours)
    except (TypeError, ValueError):
        return False


def apply_script(data: Mapping) -> ScriptRequest | None:
    """The submission with its ``sbatch`` script's fields filling the fields it leaves empty (None without a
    script). A field the request sets to another value than the script is a conflict, naming both."""
    raw = data.get("sbatch")
    if not isinstance(raw, str) or not raw.strip():
        return None
    if len(raw) > MAX_SCRIPT:
        raise ValidationError({"sbatch": _("A batch script may have at most %(max)d characters.") % {
            "max": MAX_SCRIPT}})
    script = parse_sbatch(raw)
    merged, conflicts = dict(data), {}
    for name, value in script.fields.items():
        sent = data.get(name)
        if sent in (None, ""):
            merged[name] = value
        elif not _same(sent, value):
            shown = "…" if name == "command" else repr(sent)
            conflicts[name] = _("%(field)s is %(sent)s here but the batch script sets it to %(ours)s (%(where)s); "
                                "set it in one place.") % {
                "field": name, "sent": shown, "ours": "…" if name == "command" else repr(value),
                "where": script.sources[name].where() if name in script.sources else _("its body")}
    return ScriptRequest(data=merged, script=script, conflicts=conflicts)


def cluster_for(script: SbatchScript | None, gpu_model: str) -> Cluster | None:
    """The cluster ``--partition`` names, when it has nodes of the job's model (refused otherwise: the job
    could never start there)."""
    if script is None or not script.cluster:
        return None
    cluster = Cluster.objects.get(name=script.cluster)
    if gpu_model and not cluster.nodes.filter(gpu_model=gpu_model).exists():
        raise ValidationError({"sbatch": _("Cluster %(cluster)s has no %(model)s GPUs, so this job could never "
                                           "start there (#SBATCH --partition).") % {
            "cluster": cluster.name, "model": gpu_model}})
    return cluster
