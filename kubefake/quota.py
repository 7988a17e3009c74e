"""Resource quantities and ResourceQuota accounting for pods, following the real API server's rules.

* Quantities (``4``, ``500m``, ``64Gi``, ``1e3``) are exact fractions; printed back in Kubernetes'
  canonical form (``1000m`` -> ``1``, ``1024Mi`` -> ``1Gi``), keeping the format of the first addend.
* A pod's usage (``pkg/quota/v1/evaluator/core/pods.go``): requests default to limits, container by
  container (``SetDefaults_Pod``); app containers are summed, each init container can raise the sum, the
  pod overhead is added. ``cpu``/``memory``/``ephemeral-storage`` count as ``requests.X`` and bare ``X``,
  limits as ``limits.X``; hugepages as ``requests.hugepages-*`` and bare; extended resources (a ``/`` in
  the name, outside the ``kubernetes.io`` domain, e.g. ``nvidia.com/gpu``) only as ``requests.X``.
  ``pods`` counts pods that are not Succeeded/Failed; ``count/pods`` every stored pod.
* Scopes: ``Terminating``, ``NotTerminating``, ``BestEffort``, ``NotBestEffort`` and ``PriorityClass``
  (``scopeSelector`` with In, NotIn, Exists, DoesNotExist); a quota with any other scope matches no pod.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in DECIMAL.items()}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$")
COMPUTE = ("cpu", "memory", "ephemeral-storage")
#: the hard keys that make every container name its requests/limits (``Constraints`` in pods.go)
MUST_SPECIFY = {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
#: resource names without a ``/`` that a quota may hold (``IsStandardQuotaResourceName``)
STANDARD_QUOTA_NAMES = {
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu", "memory", "ephemeral-storage",
    "requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage", "limits.cpu",
    "limits.memory", "limits.ephemeral-storage"}
TERMINAL = ("Succeeded", "Failed")
NANO = 10 ** 9


class Quantity:
    """An amount in whole nano-units (Kubernetes keeps no finer precision and rounds up to it) and the format
    Kubernetes would print it in (BinarySI, DecimalSI, DecimalExponent). Never changed in place."""

    __slots__ = ("nanos", "format")

    def __init__(self, nanos: int = 0, fmt: str = "DecimalSI"):
        self.nanos, self.format = nanos, fmt

    @classmethod
    def of(cls, units: int) -> Quantity:
        return cls(units * NANO)

    @property
    def value(self) -> Fraction:
        return Fraction(self.nanos, NANO)

    @classmethod
    def parse(cls, text) -> Quantity:
        """The quantity ``text`` says (parses are shared: a Quantity never changes)."""
        return _parse(str(text).strip())

    @classmethod
    def _parse(cls, text: str) -> Quantity:
        match = _QUANTITY.match(text)
        if match is None:
            raise ValueError(f"quantities must match the regular expression "
                             f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
        number, suffix, exponent = match.groups()
        value = Fraction(number)
        if exponent is not None:
            value, fmt = value * Fraction(10) ** int(exponent), "DecimalExponent"
        elif suffix in BINARY:
            value, fmt = value * BINARY[suffix], "BinarySI"
        else:
            value, fmt = value * Fraction(10) ** DECIMAL[suffix or ""], "DecimalSI"
        return cls(math.ceil(value * NANO), fmt)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos + other.nanos, other.format if self.nanos == 0 else self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos - other.nanos, self.format)

    def __eq__(self, other) -> bool:
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __hash__(self):
        return hash(self.nanos)

    def __repr__(self):
        return f"Quantity({str(self)!r})"

    def __str__(self) -> str:
        return _format(self.nanos, self.format)


@lru_cache(maxsize=4096)
def _format(nanos: int, fmt: str) -> str:
    """Kubernetes' canonical form: the largest suffix that keeps the number whole, binary when parsed binary."""
    sign, nanos = ("-" if nanos < 0 else ""), abs(nanos)
    if nanos == 0:
        return "0"
    if fmt == "BinarySI" and nanos >= 1024 * NANO and nanos % NANO == 0:
        number, power = nanos // NANO, 0
        while number % 1024 == 0 and power < 6:
            number, power = number // 1024, power + 1
        return f"{sign}{number}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}"
    mantissa, exponent = nanos, -9
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa, exponent = mantissa // 1000, exponent + 3
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exponent]}"


_parse = lru_cache(maxsize=4096)(Quantity._parse)


def canonical(text) -> str:
    return str(Quantity.parse(text))


def _add(total: dict, more: dict) -> dict:
    for key, quantity in more.items():
        total[key] = total[key] + quantity if key in total else quantity
    return total


def _max(total: dict, other: dict) -> dict:
    for key, quantity in other.items():
        if key not in total or quantity.nanos > total[key].nanos:
            total[key] = quantity
    return total


def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: a qualified name with a domain that is not kubernetes.io's."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _parsed(resources: dict | None) -> dict:
    return {name: Quantity.parse(value) for name, value in (resources or {}).items()}


def container_resources(container: dict) -> tuple[dict, dict]:
    """(requests, limits) with requests defaulted from limits, as the API server stores a pod."""
    resources = container.get("resources") or {}
    limits = _parsed(resources.get("limits"))
    return {**limits, **_parsed(resources.get("requests"))}, limits


def default_requests(pod: dict) -> None:
    """``SetDefaults_Pod``: a container that sets a limit and no request for a resource requests its limit."""
    for container in [*pod.get("spec", {}).get("containers", []), *pod.get("spec", {}).get("initContainers", [])]:
        resources = container.get("resources") or {}
        if resources.get("limits"):
            requests = resources.setdefault("requests", {})
            for name, value in resources["limits"].items():
                requests.setdefault(name, value)


def _compute_usage(requests: dict, limits: dict) -> dict:
    """``podComputeUsageHelper``: quota keys for one set of requests and limits."""
    usage = {}
    for name in COMPUTE:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, quantity in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = quantity
        elif is_extended(name):
            usage[f"requests.{name}"] = quantity
    return usage


def terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL


def pod_usage(pod: dict) -> dict:
    """Everything a pod counts against quotas: {quota key: Quantity}."""
    usage = {"count/pods": Quantity.of(1)}
    if terminal(pod):
        return usage
    spec = pod.get("spec") or {}
    requests, limits = {}, {}
    for container in spec.get("containers", []):
        container_requests, container_limits = container_resources(container)
        _add(requests, container_requests)
        _add(limits, container_limits)
    for container in spec.get("initContainers", []):
        container_requests, container_limits = container_resources(container)
        _max(requests, container_requests)
        _max(limits, container_limits)
    overhead = _parsed(spec.get("overhead"))
    _add(requests, overhead)
    _add(limits, overhead)
    return {**usage, "pods": Quantity.of(1), **_compute_usage(requests, limits)}


def missing_requests(pod: dict, hard_keys) -> str:
    """``Constraints``: when a quota holds cpu or memory, every container must name them; "" when it does."""
    required = MUST_SPECIFY.intersection(hard_keys)
    if not required:
        return ""
    missing: dict[str, set] = {}
    spec = pod.get("spec") or {}
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        named = set(_compute_usage(*container_resources(container)))
        for key in required - named:
            missing.setdefault(key, set()).add(container.get("name", ""))
    if not missing:
        return ""
    return "must specify " + "; ".join(f"{key} for: {','.join(sorted(names))}"
                                       for key, names in sorted(missing.items()))


def best_effort(pod: dict) -> bool:
    spec = pod.get("spec") or {}
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        requests, limits = container_resources(container)
        if any(name in requests or name in limits for name in ("cpu", "memory")):
            return False
    return True


def _scope_matches(pod: dict, scope: str, operator: str = "Exists", values=()) -> bool:
    spec = pod.get("spec") or {}
    if scope == "PriorityClass":
        name = spec.get("priorityClassName")
        return {"In": name in values, "NotIn": name not in values, "Exists": bool(name),
                "DoesNotExist": not name}.get(operator, False)
    matched = {"Terminating": lambda: spec.get("activeDeadlineSeconds") is not None,
               "NotTerminating": lambda: spec.get("activeDeadlineSeconds") is None,
               "BestEffort": lambda: best_effort(pod), "NotBestEffort": lambda: not best_effort(pod)}.get(scope)
    if matched is None:
        return False  # a scope this fake does not know matches no pod
    return matched() != (operator == "DoesNotExist")


def quota_matches(quota: dict, pod: dict) -> bool:
    spec = quota.get("spec") or {}
    terms = [(scope, "Exists", ()) for scope in spec.get("scopes") or []]
    terms += [(e.get("scopeName"), e.get("operator"), e.get("values") or ())
              for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or []]
    return all(_scope_matches(pod, *term) for term in terms)


def matching_keys(quota: dict) -> list[str]:
    """The hard keys a pod can count against (``MatchingResources``), sorted."""
    hard = (quota.get("spec") or {}).get("hard") or {}

    def pod_key(key: str) -> bool:
        if key in ("pods", "count/pods") or key in COMPUTE or key.startswith("hugepages-"):
            return True
        prefix, _, name = key.partition(".")
        if prefix == "requests":
            return name in COMPUTE or name.startswith("hugepages-") or is_extended(name)
        return prefix == "limits" and name in COMPUTE

    return sorted(k for k in hard if pod_key(k))


def invalid_hard_keys(quota: dict) -> str:
    """The first hard key a real API server would refuse, worded like its validation; "" when none."""
    for key in (quota.get("spec") or {}).get("hard") or {}:
        if "/" not in key and key not in STANDARD_QUOTA_NAMES and not key.startswith(
                ("hugepages-", "requests.hugepages-")):
            return f'spec.hard[{key}]: Invalid value: "{key}": must be a standard resource for quota'
        try:
            Quantity.parse(quota["spec"]["hard"][key])
        except ValueError as exc:
            return f"spec.hard[{key}]: Invalid value: {quota['spec']['hard'][key]!r}: {exc}"
    return ""


def pretty(usage: dict) -> str:
    """``prettyPrint``: ``key=value`` pairs, sorted, comma-separated."""
    return ",".join(f"{key}={usage[key]}" for key in sorted(usage))
