"""Named ports of a job: the rule that checks them at submission, and their submitted form.

A job declares the ports its program serves (``tensorboard:6006``, ``ui:8080``); each opens through the portal on
the workload origin, as a notebook does (``scheduling.workloads``), while the job runs. The name becomes a
Kubernetes port name of the job's Service, so it follows Kubernetes' rule for one (an IANA service name: at most
15 lowercase letters, digits and single hyphens, one letter at least, a letter or digit at each end). A port is
refused where the portal itself listens in the job's pod (the notebook server, the ranks' rendezvous), a name where
it names its own ports (``RESERVED_NAMES``); a name or a
port given twice, or more than ``MAX_PORTS`` of them, is refused too, naming the field and the limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from gpuportal.web.validation import refuse
from scheduling.executors.kubernetes.manifests import MASTER_PORT, NOTEBOOK_PORT
from scheduling.jobs.limits import MAX_PORT_ENTRY, MAX_PORT_NAME, MAX_PORTS
from scheduling.models import NamedPort, WorkloadKind

FIELD = "ports"
MIN_PORT, MAX_PORT = 1, 65535
#: Ports the portal uses inside a job's pod or allocation, and what for.
RESERVED_PORTS = {NOTEBOOK_PORT: gettext_lazy("the notebook server"),
                  MASTER_PORT: gettext_lazy("the rendezvous of a multi-node job's ranks")}
#: Port names the portal gives its own ports in a job's pod and Service.
RESERVED_NAMES = ("notebook", "rendezvous", "http")
#: The kinds that may declare ports: a service serves its one port at its endpoint already.
KINDS_WITH_PORTS = (WorkloadKind.BATCH, WorkloadKind.NOTEBOOK, WorkloadKind.ARRAY)
_NAME = re.compile(r"[a-z0-9](?:-?[a-z0-9])*")
_SEPARATORS = re.compile(r"[,\s]+")


def entries(raw) -> list[str]:
    """The ``name:port`` entries of what was submitted: a list (the API, a template, a clone) or text with commas
    or spaces between them (the form, a batch script's field)."""
    if raw in (None, ""):
        return []
    if isinstance(raw, str):
        return [part for part in _SEPARATORS.split(raw.strip()) if part]
    if isinstance(raw, Iterable) and not isinstance(raw, dict):
        return [part if isinstance(part, str) else repr(part) for part in raw]
    refuse(FIELD, _("Ports must be a list of name:port entries, e.g. [\"tensorboard:6006\"]."))


def _name(name: str, entry: str) -> str:
    if len(name) > MAX_PORT_NAME or not _NAME.fullmatch(name) or not any(c.isalpha() for c in name):
        refuse(FIELD, _("%(entry)r: a port name has at most %(max)d lowercase letters, digits and single hyphens, "
                        "at least one letter, and begins and ends with a letter or digit (a Kubernetes port "
                        "name).") % {"entry": entry, "max": MAX_PORT_NAME})
    if name in RESERVED_NAMES:
        refuse(FIELD, _("%(entry)r: the name %(name)s is the portal's own; choose another.") % {
            "entry": entry, "name": name})
    return name


def _number(text: str, entry: str) -> int:
    port = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else 0
    if not MIN_PORT <= port <= MAX_PORT:
        refuse(FIELD, _("%(entry)r: the port must be a whole number from %(min)d to %(max)d.") % {
            "entry": entry, "min": MIN_PORT, "max": MAX_PORT})
    if port in RESERVED_PORTS:
        refuse(FIELD, _("%(entry)r: port %(port)d is the portal's (%(what)s); choose another.") % {
            "entry": entry, "port": port, "what": RESERVED_PORTS[port]})
    return port


def parse_ports(raw, kind: str = WorkloadKind.BATCH) -> list[NamedPort]:
    """The named ports of a submission, checked (see the module); ``ValidationError`` on ``ports`` otherwise."""
    given = entries(raw)
    if not given:
        return []
    if kind not in KINDS_WITH_PORTS:
        refuse(FIELD, _("A service serves its own port at its endpoint; named ports are for batch jobs, notebooks "
                        "and array tasks."))
    if len(given) > MAX_PORTS:
        refuse(FIELD, _("A job may name at most %(max)d ports; %(n)d were given.") % {"max": MAX_PORTS,
                                                                                     "n": len(given)})
    ports: list[NamedPort] = []
    for entry in given:
        name, colon, number = entry.strip().partition(":")
        if not colon or len(entry) > MAX_PORT_ENTRY:
            refuse(FIELD, _("%(entry)r is not name:port (e.g. tensorboard:6006), at most %(max)d characters.") % {
                "entry": entry[:MAX_PORT_ENTRY * 2], "max": MAX_PORT_ENTRY})
        port = NamedPort(name=_name(name, entry), port=_number(number, entry))
        if any(p["name"] == port["name"] for p in ports):
            refuse(FIELD, _("The port name %(name)s is given twice.") % {"name": port["name"]})
        if any(p["port"] == port["port"] for p in ports):
            refuse(FIELD, _("Port %(port)d is given twice.") % {"port": port["port"]})
        ports.append(port)
    return ports


def as_entries(ports: list[NamedPort]) -> list[str]:
    """A job's ports as they are submitted (``name:port``): what a clone submits again."""
    return [f"{p['name']}:{p['port']}" for p in ports]

