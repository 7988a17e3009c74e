"""An audit record's before and after in words: "admin state: active → draining", not a dictionary.

The record keeps the values as the service wrote them (codes, ids, ISO times), because they are hashed and exported
as they are. The page reads them for people: each field by its label, a code by its choice's label, a related row
by its name, a time in the reader's zone with its year, all in the reader's language. Fields are labelled from the
audited model where it has them (``object_type`` is its ``app.model`` label); the keys services add beside them
(an evidence, a preemptor) from ``EXTRA_LABELS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.utils import formats, timezone
from django.utils.dateparse import parse_datetime
from django.utils.functional import Promise
from django.utils.translation import gettext, gettext_noop

from gpuportal.text.formatting import list_text

#: Labels of keys that are no field of the audited model (what a service adds to say what it did).
EXTRA_LABELS = {
    "allocated": gettext_noop("allocated GPUs"),
    "avoid_nodes": gettext_noop("avoided nodes"),
    "before": gettext_noop("before"),
    "evidence": gettext_noop("evidence"),
    "job": gettext_noop("job"),
    "queued": gettext_noop("jobs queued"),
    "cancelled": gettext_noop("jobs cancelled"),
    "kind": gettext_noop("kind"),
    "preemptor": gettext_noop("preempting job"),
    "preemptor_tenant": gettext_noop("tenant of the preempting job"),
    "victim": gettext_noop("preempted job"),
    "victim_tenant": gettext_noop("tenant of the preempted job"),
    "victim_owner": gettext_noop("owner of the preempted job"),
    "rule": gettext_noop("rule"),
    "priority": gettext_noop("priority"),
    "task_type": gettext_noop("task type"),
    "status": gettext_noop("status"),
    "state": gettext_noop("state"),
    "admin_state": gettext_noop("admin state"),
    "max_runtime_minutes": gettext_noop("max runtime (minutes)"),
    "max_runtime_minutes_before": gettext_noop("max runtime before (minutes)"),
    "extra_gpus": gettext_noop("extra GPUs"),
    "gpu_model": gettext_noop("GPU model"),
    "start": gettext_noop("start"),
    "end": gettext_noop("end"),
    "guaranteed": gettext_noop("guaranteed GPUs"),
    "limit": gettext_noop("limit GPUs"),
    "burst": gettext_noop("burst"),
    "reservation": gettext_noop("reservation"),
    "quota": gettext_noop("quota"),
    "name": gettext_noop("name"),
    "version": gettext_noop("version"),
    "fingerprint": gettext_noop("fingerprint"),
    "snapshot": gettext_noop("snapshot"),
    "reason": gettext_noop("reason"),
    "tenant": gettext_noop("tenant"),
    "user": gettext_noop("user"),
    "screenshot": gettext_noop("screenshot"),
    "type": gettext_noop("type"),
    "bytes": gettext_noop("bytes"),
    "prefix": gettext_noop("prefix"),
    "text": gettext_noop("text"),
    "area": gettext_noop("area"),
    "configuration": gettext_noop("configuration"),
    "description": gettext_noop("description"),
    "source": gettext_noop("source"),
    "issuer": gettext_noop("issuer"),
    "identifier": gettext_noop("identifier"),
    "expires_at": gettext_noop("expires"),
    "revoked_at": gettext_noop("revoked"),
    "revoked_reason": gettext_noop("revocation reason"),
    "is_active": gettext_noop("active"),
    "archived": gettext_noop("archived"),
    "gpu_hours_allocated": gettext_noop("GPU-hours allocated"),
    "role": gettext_noop("role"),
}

#: Codes that several models share, read as words wherever they appear (a rule of the scheduling engine). Audit
#: knows no app above it: each app that records such codes gives their words with ``audit_values`` (one table, the
#: app's own, message ids not yet translated).
EXTRA_VALUES: dict[str, str] = {}


def audit_values(words: dict[str, str]) -> None:
    """Read these codes as these words (``gettext_noop`` message ids) wherever a record's value is one of them."""
    EXTRA_VALUES.update(words)

NOTHING = "—"


@dataclass(frozen=True)
class Change:
    """One field of a record: its label and its value before and after, as words ("" where the side has none).
    A side is ``literal`` when it shows recorded text as it was recorded (a name, a token's prefix, a note): the
    page sets it apart as data, not as a sentence of the portal."""

    field: str
    before: str
    after: str
    before_literal: bool = False
    after_literal: bool = False

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _model(object_type: str):
    try:
        return apps.get_model(object_type)
    except (LookupError, ValueError):
        return None


def _field(model, name: str):
    if model is None:
        return None
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def _choice_label(value, choices) -> str | None:
    for code, label in choices or ():
        if isinstance(label, list | tuple):  # grouped choices
            found = _choice_label(value, label)
            if found is not None:
                return found
        elif code == value:
            return str(label)
    return None


def label_of(model, key: str) -> str:
    """A key in words: the model field's verbose name, a known extra key's label, else the key with spaces."""
    field = _field(model, key)
    if field is not None and isinstance(getattr(field, "verbose_name", None), Promise):  # marked for translation
        return str(field.verbose_name)
    if key in EXTRA_LABELS:
        return gettext(EXTRA_LABELS[key])
    return key.replace("_", " ")


class _Names:
    """Names of related rows, looked up once per page (one query per related model)."""

    def __init__(self):
        self.wanted: dict = {}
        self.found: dict = {}

    def want(self, model, value) -> None:
        if model is not None and isinstance(value, int | str) and value != "":
            self.wanted.setdefault(model, set()).add(value)

    def load(self) -> None:
        for model, keys in self.wanted.items():
            try:
                rows = model._default_manager.in_bulk(list(keys))
            except (ValueError, TypeError):
                continue
            self.found.update({(model, str(pk)): str(row) for pk, row in rows.items()})

    def name(self, model, value) -> str | None:
        return self.found.get((model, str(value)))


def _time_text(text: str) -> str | None:
    moment = parse_datetime(text) if len(text) >= 16 and text[4:5] == "-" else None
    if moment is None:
        return None
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_default_timezone())
    return formats.date_format(timezone.localtime(moment), "Y-m-d H:i T")


def value_text(value, field=None, names: _Names | None = None) -> str:
    """A stored value in words in the reader's language."""
    if value is None or value == "" or value == [] or value == {}:
        return NOTHING
    if isinstance(value, bool):
        return gettext("yes") if value else gettext("no")
    if field is not None and getattr(field, "choices", None):
        label = _choice_label(value, field.flatchoices)
        if label is not None:
            return label
    if field is not None and isinstance(field, models.ForeignKey) and names is not None:
        name = names.name(field.related_model, value)
        if name is not None:
            return name
    if isinstance(value, list):
        return list_text(value_text(item) for item in value)
    if isinstance(value, dict):
        return list_text((f"{label_of(None, str(key))}: {value_text(item)}" for key, item in value.items()),
                         clauses=True)
    if isinstance(value, str):
        if value in EXTRA_VALUES:
            return gettext(EXTRA_VALUES[value])
        return _time_text(value) or value
    return str(value)


def object_label(object_type: str) -> str:
    """What kind of thing a record is about, in the reader's language ("request", "node"); its recorded text
    (``object_repr``) is shown beside it as it was recorded."""
    model = _model(object_type)
    return str(model._meta.verbose_name) if model is not None else object_type


def is_literal(value, field=None) -> bool:
    """Whether ``value_text`` shows ``value`` (or a part of it) as recorded rather than in words of the portal."""
    if isinstance(value, dict | list):
        return any(is_literal(item) for item in (value.values() if isinstance(value, dict) else value))
    if not isinstance(value, str) or value == "":
        return False
    if field is not None and (getattr(field, "choices", None) or isinstance(field, models.ForeignKey)):
        return False
    return value not in EXTRA_VALUES and _time_text(value) is None


def changes_of(records) -> dict[int, list[Change]]:
    """Each record's fields in words, by the record's id: the changed fields first, in the order stored."""
    names = _Names()
    prepared = []
    for record in records:
        model = _model(record.object_type)
        before, after = record.before, record.after
        if not isinstance(before, dict) or not isinstance(after, dict):  # a value kept whole (rare): one line
            before = {"": before} if before is not None and not isinstance(before, dict) else (before or {})
            after = {"": after} if after is not None and not isinstance(after, dict) else (after or {})
        keys = list(dict.fromkeys([*before, *after]))
        for key in keys:
            field = _field(model, key)
            if isinstance(field, models.ForeignKey):
                names.want(field.related_model, before.get(key))
                names.want(field.related_model, after.get(key))
        prepared.append((record, model, before, after, keys))
    names.load()
    result = {}
    for record, model, before, after, keys in prepared:
        rows = []
        for key in keys:
            field = _field(model, key)
            rows.append(Change(label_of(model, key) if key else "",
                               value_text(before.get(key), field, names) if key in before else "",
                               value_text(after.get(key), field, names) if key in after else "",
                               is_literal(before.get(key), field), is_literal(after.get(key), field)))
        result[record.pk] = sorted(rows, key=lambda change: not change.changed) if record.before and record.after \
            else rows
    return result
