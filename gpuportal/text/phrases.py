"""Sentences stored now and read later, in the reader's language.

A job's timeline is written when things happen — by a worker, in the site's language, or during someone's
request, in theirs — and read later by anyone. So a ``Phrase`` is stored twice: its English text (what the
API returns and what a search finds) and its message id with parameters, from which a page renders it in the
language of whoever reads it (``read``). It is a ``str``, so it flows through every place a reason goes.
"""

from __future__ import annotations

from django.utils.translation import gettext, pgettext

from gpuportal.text.formatting import duration_parts, list_text

#: The key of a stored phrase in an event's JSON data.
DATA_KEY = "phrase"


class Phrase(str):
    """``Phrase(gettext_noop("Held by %(user)s."), {"user": "alice"})``: reads as the English sentence.

    A parameter may itself be a phrase (an attempt's failure inside "Attempt 2 failed: …"): it is stored as its
    message id and parameters too, so the whole sentence reads in one language."""

    msgid: str
    params: dict

    def __new__(cls, msgid: str, params: dict | None = None):
        params = dict(params or {})
        phrase = super().__new__(cls, msgid % params if params else msgid)
        phrase.msgid, phrase.params = msgid, params
        return phrase

    def __getnewargs__(self):  # copies and pickles are phrases with the same text
        return self.msgid, self.params

    def stored(self) -> dict:
        """The message id and parameters as JSON (nested phrases as their own ``{"msgid", "params"}``)."""
        return {"msgid": self.msgid, "params": {name: value.stored() if isinstance(value, Phrase) else value
                                                for name, value in self.params.items()}}

    def as_data(self) -> dict:
        return {DATA_KEY: self.stored()}


class Clauses(Phrase):
    """Phrases read as one list of clauses: "a; b" in English, "a；b" in Chinese (a parameter of a phrase, such as
    the history of a job's attempts); with ``sentences``, whole sentences one after the other ("A. B.")."""

    items: list
    sentences: bool

    def __new__(cls, items, sentences: bool = False):
        items = list(items)
        clauses = super().__new__(cls, (" " if sentences else "; ").join(str(item) for item in items))
        clauses.items, clauses.sentences = items, sentences
        return clauses

    def __getnewargs__(self):
        return self.items, self.sentences

    def stored(self) -> dict:
        return {"msgid": "", "sentences" if self.sentences else "clauses": [
            item.stored() if isinstance(item, Phrase) else str(item) for item in self.items]}


def duration(seconds: float) -> Phrase:
    """A duration for a stored sentence ("2 h 7 min"), read later in the reader's language."""
    return Phrase(*duration_parts(seconds))


def label(choice_label) -> Phrase:
    """A model choice's label (``JobStatus.FAILED.label``, translated lazily) as a phrase: its message id is kept,
    so a stored sentence naming a status reads it in the reader's language."""
    args = getattr(choice_label, "_args", None)
    return Phrase(args[0] if args and isinstance(args[0], str) else str(choice_label))


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
        return render(stored)
    except (KeyError, TypeError, ValueError):
        return text


def render(stored: dict) -> str:
    """A stored ``{"msgid", "params"}`` in the reader's language, nested phrases too; raises KeyError,
    TypeError or ValueError when it does not fit its parameters (``read`` falls back to the stored text)."""
    if "clauses" in stored:
        return list_text((render(item) if _is_stored(item) else str(item) for item in stored["clauses"]),
                         clauses=True)
    if "sentences" in stored:
        return pgettext("separator of sentences", " ").join(
            render(item) if _is_stored(item) else str(item) for item in stored["sentences"])
    params = stored.get("params") or {}
    if not isinstance(params, dict):
        raise TypeError("a phrase's parameters are a mapping")
    params = {name: render(value) if _is_stored(value) else value for name, value in params.items()}
    return gettext(stored["msgid"]) % params


def _is_stored(value) -> bool:
    return isinstance(value, dict) and isinstance(value.get("msgid"), str)


def msgids(data: dict | None) -> list[str]:
    """Every message id of the phrase stored in ``data``, nested ones included (what the catalogue must hold)."""
    stored = (data or {}).get(DATA_KEY)
    found, todo = [], [stored] if _is_stored(stored) else []
    while todo:
        phrase = todo.pop()
        if phrase["msgid"]:
            found.append(phrase["msgid"])
        todo.extend(value for value in [*(phrase.get("params") or {}).values(), *phrase.get("clauses", []),
                                        *phrase.get("sentences", [])] if _is_stored(value))
    return found
