"""Sentences stored now and read later, in the reader's language.

A job's timeline is written when things happen — by a worker, in the site's language, or during someone's
request, in theirs — and read later by anyone. So a ``Phrase`` is stored twice: its English text (what the
API returns and what a search finds) and its message id with parameters, from which a page renders it in the
language of whoever reads it (``read``). It is a ``str``, so it flows through every place a reason goes.
"""

from __future__ import annotations

from django.utils.translation import gettext

#: The key of a stored phrase in an event's JSON data.
DATA_KEY = "phrase"


class Phrase(str):
    """``Phrase(gettext_noop("Held by %(user)s."), {"user": "alice"})``: reads as the English sentence."""

    msgid: str
    params: dict

    def __new__(cls, msgid: str, params: dict | None = None):
        params = dict(params or {})
        phrase = super().__new__(cls, msgid % params if params else msgid)
        phrase.msgid, phrase.params = msgid, params
        return phrase

    def as_data(self) -> dict:
        return {DATA_KEY: {"msgid": self.msgid, "params": self.params}}


def data_of(text) -> dict:
    """What to keep beside ``text`` in an event's data so that it can be read in any language ({} for text)."""
    return text.as_data() if isinstance(text, Phrase) else {}


def read(text: str, data: dict | None) -> str:
    """``text`` in the reader's language when it was stored as a phrase; as stored otherwise (or if the
    stored phrase no longer fits its parameters)."""
    stored = (data or {}).get(DATA_KEY)
    if not isinstance(stored, dict) or not isinstance(stored.get("msgid"), str):
        return text
    try:
        return gettext(stored["msgid"]) % stored.get("params", {})
    except (KeyError, TypeError, ValueError):
        return text
