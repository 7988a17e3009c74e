"""The acceptance checklist's rows, as the page and the review pack's appendix read them.

``checklist.checklist()`` builds them from live data; nothing stores them (the checklist is read as of now,
every time). Strings are translated in the language active when the rows were built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Evidence:
    """One piece of evidence the portal holds for a row: a sentence (a job, a node event, a report's figures, a
    count of audit records) and the page that shows it (None: nothing to link to)."""

    text: str
    url: str | None = None


@dataclass(frozen=True, slots=True)
class Note:
    """A pilot's note on a row (``AcceptanceNote``), without the screenshot's bytes: ``screenshot_url`` serves
    them when ``has_screenshot``. ``author`` is a username ("" when the user is gone)."""

    id: int
    text: str
    configuration: str
    has_screenshot: bool
    screenshot_url: str | None
    screenshot_name: str
    author: str
    created_at: datetime

    @property
    def summary(self) -> str:
        """The note in one line for a table cell: its text, else its configuration."""
        return self.text or self.configuration or ""


@dataclass(frozen=True, slots=True)
class ChecklistRow:
    """One area of the checklist. ``area`` is an ``AcceptanceArea`` value ("multi_card", ...) and ``area_label``
    its name; ``capability`` says what is accepted and ``rule`` how the status is decided (with the thresholds
    applied). ``status`` is a ``checklist.Status`` value ("present", "attention", "missing"), ``status_text``
    its label and ``why`` the sentence that justifies it from the evidence. ``evidence`` holds at most
    ``checklist.EVIDENCE_LINKS`` items per kind, newest first; ``notes`` are the pilots' notes, oldest first."""

    area: str
    area_label: str
    capability: str
    rule: str
    evidence: list[Evidence]
    status: str
    status_text: str
    why: str
    notes: list[Note] = field(default_factory=list)
