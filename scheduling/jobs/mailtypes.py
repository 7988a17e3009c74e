"""The ``mail_type`` submit field: which events of a job mail its owner, written as Slurm's ``--mail-type``.

``BEGIN``, ``END``, ``FAIL``, ``REQUEUE`` (``MailType``), comma-separated, ``ALL`` for the four, ``NONE`` for none
(stored as itself: it overrides the owner's notification preferences); empty leaves it to those preferences. Any
other word (Slurm's ``TIME_LIMIT_90``, ``ARRAY_TASKS``) is refused by name rather than dropped, so that nobody
believes the portal mails for it. Stored in ``MailType``'s order, so the same choice always reads the same."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from scheduling.models import MAIL_NONE, MailType

MAIL_ALL = "ALL"
ACCEPTED = (*MailType.values, MAIL_ALL, MAIL_NONE)


def parse_mail_type(raw) -> str:
    """The stored form of a ``mail_type`` value ("" for none given); ``ValidationError`` keyed ``mail_type``."""
    if raw in (None, ""):
        return ""
    if not isinstance(raw, str):
        raise ValidationError({"mail_type": _("Give the mail types as text, e.g. END,FAIL.")})
    words = [word.strip().upper() for word in raw.split(",") if word.strip()]
    unknown = [word for word in words if word not in ACCEPTED]
    if unknown:
        raise ValidationError({"mail_type": _("Unknown mail type %(unknown)s; use %(accepted)s.") % {
            "unknown": ", ".join(unknown[:5]), "accepted": ", ".join(ACCEPTED)}})
    if MAIL_NONE in words:
        if len(set(words)) > 1:
            raise ValidationError({"mail_type": _("NONE cannot be combined with other mail types.")})
        return MAIL_NONE
    chosen = set(MailType.values) if MAIL_ALL in words else set(words)
    return ",".join(value for value in MailType.values if value in chosen)
