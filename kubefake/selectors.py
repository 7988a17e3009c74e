"""Label and field selectors, as a real API server applies them: lists (``kubefake.store``) and watch streams
(``kubefake.http``) filter with the same rules, so they live apart from both.

Labels: ``key=value`` (``==``), ``key!=value``, ``key``, ``!key``, ``key in (a,b)``, ``key notin (a,b)``.
Fields: ``path.to.field=value`` and ``!=``, comparing the field's string form.
"""

from __future__ import annotations

import re


def match_labels(labels: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in re.split(r",(?![^()]*\))", selector or ""))):
        if m := re.match(r"^([\w./-]+)\s+(in|notin)\s+\((.*)\)$", term):
            values = {v.strip() for v in m.group(3).split(",")}
            if (labels.get(m.group(1)) in values) != (m.group(2) == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: dict, path: str):
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def match_fields(obj: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        negate = "!=" in term
        key, value = term.split("!=" if negate else "=", 1)
        if (str(_field(obj, key.strip().lstrip("=")) or "") == value.strip().lstrip("=")) == negate:
            return False
    return True
