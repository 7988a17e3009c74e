"""Parsing what users typed, with messages that name the field and the limit (shared by every service)."""

from __future__ import annotations

from django.utils.translation import gettext as _


def whole_number(errors: dict, data: dict, field: str, minimum: int, maximum: int, label: str,
               too_large: str | None = None) -> int | None:
    """Parse a whole number within [minimum, maximum]; on failure record a message naming the limit."""
    raw = data.get(field)
    if raw in (None, ""):
        errors[field] = _("%(label)s is required.") % {"label": label}
        return None
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = int(raw)
        if isinstance(raw, float) and raw != value:
            raise ValueError
    except (TypeError, ValueError):
        errors[field] = _("%(label)s must be a whole number, not %(value)r.") % {"label": label, "value": raw}
        return None
    if value < minimum:
        errors[field] = _("%(label)s must be at least %(min)d (got %(value)d).") % {
            "label": label, "min": minimum, "value": value}
        return None
    if value > maximum:
        errors[field] = (too_large or _("%(label)s must be at most %(max)d (got %(value)d).")) % {
            "label": label, "max": maximum, "value": value}
        return None
    return value
